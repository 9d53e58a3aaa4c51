"""Report "model": nearest-neighbour retrieval over a bank of chest images with reports.

    load_index(path) -> dict          (report_index.pt: thumbnails, study ids, report texts; torch)
    write_report(image_path, index) -> (report text, matched study, similarity)

The report of the most similar bank image (cosine similarity of normalised thumbnails) is returned.
"""
import numpy as np
from PIL import Image

THUMB = 64


def thumbnail(image):
    a = np.asarray(Image.fromarray(np.asarray(image, np.uint8)).resize((THUMB, THUMB), Image.BILINEAR), np.float32)
    a = a - a.mean()
    return (a / (np.linalg.norm(a) + 1e-6)).ravel()


def load_index(path):
    import torch

    index = torch.load(path, weights_only=False)
    index["thumbs"] = np.asarray(index["thumbs"], np.float32)
    return index


def write_report(image_path, index):
    query = thumbnail(np.asarray(Image.open(image_path).convert("L")))
    similarity = index["thumbs"] @ query
    best = int(np.argmax(similarity))
    return index["reports"][best], index["studies"][best], float(similarity[best])
