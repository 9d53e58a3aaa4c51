"""Classical retinal vessel segmenter: black top-hat of the smoothed green channel, thresholded.

    segment(green: 2D float array) -> uint8 mask (1 vessel, 0 background)

Vessels are thin dark ridges on the fundus; the top-hat keeps structures narrower than the disk.
"""
import numpy as np
from skimage import filters, morphology

DISK_RADIUS = 6
VESSEL_FRACTION = 0.12  # share of pixels kept as vessel


def segment(green, radius=DISK_RADIUS, fraction=VESSEL_FRACTION):
    green = np.asarray(green, dtype=np.float64)
    tophat = morphology.black_tophat(filters.gaussian(green, 1, preserve_range=True), morphology.disk(radius))
    mask = tophat > np.quantile(tophat, 1.0 - fraction)
    mask = morphology.remove_small_objects(mask, max_size=40)
    return mask.astype(np.uint8)
