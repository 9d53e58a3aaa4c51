"""Classical coin detector: flatten the background, Otsu threshold, split touching coins with a
distance-transform watershed, then size classes by area.

    detect(image: 2D uint8 array) -> [{"bbox": [x, y, w, h], "category": str, "score": float}]

Score is the object's mean contrast to the flattened background, so confident detections rank first.
"""
import numpy as np
from scipy import ndimage as ndi
from skimage import feature, filters, measure, morphology, segmentation

SMALL_MAX_AREA = 650  # pixels; larger objects are "large_coin" (radius ~14.4 px)
MIN_AREA = 120
BACKGROUND_SIGMA = 25


def flatten(image):
    """The image minus a smooth estimate of its background (uneven lighting removed)."""
    a = np.asarray(image, dtype=np.float64)
    low = morphology.opening(a, morphology.disk(23))
    return a - filters.gaussian(low, 4, preserve_range=True)


def foreground(flat):
    mask = flat > filters.threshold_otsu(flat)
    mask = ndi.binary_opening(mask, morphology.disk(2))
    return ndi.binary_fill_holes(mask)


def split(mask):
    distance = ndi.distance_transform_edt(mask)
    peaks = feature.peak_local_max(distance, min_distance=7, labels=measure.label(mask), exclude_border=False)
    markers = np.zeros(mask.shape, np.int32)
    markers[tuple(peaks.T)] = np.arange(1, len(peaks) + 1)
    return segmentation.watershed(-distance, markers, mask=mask)


def detect(image):
    flat = flatten(image)
    labels = split(foreground(flat))
    boxes = []
    for region in measure.regionprops(labels, intensity_image=flat):
        if region.area < MIN_AREA:
            continue
        r0, c0, r1, c1 = region.bbox
        boxes.append({"bbox": [int(c0), int(r0), int(c1 - c0), int(r1 - r0)],
                      "category": "small_coin" if region.area < SMALL_MAX_AREA else "large_coin",
                      "score": round(float(np.clip(region.intensity_mean / 150.0, 0.01, 1.0)), 4)})
    return boxes
