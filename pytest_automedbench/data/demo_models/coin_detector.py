"""Classical coin detector: Sobel elevation map + marker watershed, then size classes.

    detect(image: 2D uint8 array) -> [{"bbox": [x, y, w, h], "category": str, "score": float}]

Score is the object's mean contrast to the background, so confident detections rank first.
"""
import numpy as np
from scipy import ndimage as ndi
from skimage import filters, measure, segmentation

SMALL_MAX_AREA = 1560  # pixels; larger objects are "large_coin"
MIN_AREA = 150


def foreground(image, low=30, high=150):
    elevation = filters.sobel(image)
    markers = np.zeros(image.shape, np.int32)
    markers[image < low] = 1
    markers[image > high] = 2
    mask = segmentation.watershed(elevation, markers) == 2
    return ndi.binary_fill_holes(mask)


def detect(image, low=30, high=150):
    image = np.asarray(image)
    labels = measure.label(foreground(image, low, high))
    background = float(image[labels == 0].mean()) if (labels == 0).any() else 0.0
    boxes = []
    for region in measure.regionprops(labels, intensity_image=image):
        if region.area < MIN_AREA:
            continue
        r0, c0, r1, c1 = region.bbox
        contrast = (float(region.intensity_mean) - background) / 255.0
        boxes.append({"bbox": [int(c0), int(r0), int(c1 - c0), int(r1 - r0)],
                      "category": "small_coin" if region.area < SMALL_MAX_AREA else "large_coin",
                      "score": round(float(np.clip(0.5 + contrast, 0.01, 1.0)), 4)})
    return boxes
