"""The names the code reader knows: which calls read data, which are plumbing, which check a result.

Everything here is matched against code (resolved call names like `numpy.unique`, attribute names,
imported modules), never against comments or strings: judge/reading/code.py reads cells with `ast`.
A call that is none of these, applied to data, is a *method*: the work the rubric asks about.
"""
from __future__ import annotations

import re

# Modules whose functions only move, show or store data (a call into them is never "the method").
PLUMBING_MODULES = (
    "os", "sys", "json", "shutil", "pathlib", "glob", "re", "time", "datetime", "csv", "subprocess",
    "logging", "warnings", "collections", "itertools", "functools", "io", "pickle", "yaml", "math",
    "matplotlib", "PIL", "nibabel", "imageio", "tifffile", "SimpleITK", "pydicom", "pandas", "tqdm",
    "random", "string", "textwrap", "pprint", "hashlib", "copy", "typing", "dataclasses", "tempfile",
    "zipfile", "tarfile", "gzip", "struct", "platform", "socket", "urllib", "requests", "argparse",
)
BUILTINS = frozenset(
    "print len sorted open str int float bool list dict set tuple frozenset range enumerate zip min max sum "
    "abs round isinstance issubclass any all map filter next iter repr type hasattr getattr setattr format "
    "vars super id hash input exit quit reversed divmod pow chr ord hex bin callable globals locals dir "
    "exec eval compile object slice bytes bytearray memoryview property staticmethod classmethod".split())
# numpy / torch functions and array methods that only build, reshape, convert or copy data.
PLUMBING_NAMES = frozenset(
    "array asarray asanyarray ascontiguousarray asfortranarray zeros ones full empty arange linspace "
    "meshgrid stack concatenate vstack hstack dstack reshape squeeze expand_dims transpose moveaxis swapaxes "
    "copy astype tolist item view flatten ravel float double half int long numpy detach contiguous permute "
    "unsqueeze clone from_numpy tensor as_tensor cpu cuda to eval train no_grad set_num_threads manual_seed "
    "seed set_printoptions float32 float64 uint8 int16 int32 int64 bool_ pad clip keys values items get "
    "append extend update pop join split strip lower upper replace startswith endswith encode decode "
    "format_map with_suffix with_name relative_to resolve absolute exists is_file is_dir mkdir makedirs "
    "getenv environ close flush sleep perf_counter monotonic add_argument parse_args dump dumps loads "
    "write writelines writerow writerows writeheader fromarray Nifti1Image Nifti1Pair set_qform "
    "set_sform set_xyzt_units set_data_dtype header get_data_dtype affine parameters numel state_dict "
    "requires_grad_ zero_grad sigmoid_ softmax_ grad enable_grad inference_mode nan_to_num nan_to_num_".split())
# Calls that make data out of nothing: their result is a constant or random, not a prediction.
CONSTANT_MAKERS = frozenset(
    "zeros_like ones_like full_like empty_like rand randn randint random choice uniform normal permutation "
    "shuffle rand_like randn_like randint_like sample".split())
# Reading data: the result is input data (or output data when the path is under the outputs folder).
READERS = frozenset(
    "load open imread read read_text read_bytes get_fdata get_data dataobj ReadImage GetArrayFromImage "
    "dcmread read_csv read_json read_excel read_table loadtxt genfromtxt load_img load_nifti imread_collection "
    "readlines readline safe_load".split())
LISTERS = frozenset("listdir glob rglob iterdir scandir walk".split())
WRITERS = frozenset(
    "save savez savez_compressed savefig imwrite imsave write_text write_bytes to_csv to_json dump "
    "WriteImage save_image save_pretrained write".split())
# Checks of values: a range, a label set, NaNs, a distribution.
RANGE_CHECKS = frozenset(
    "unique min max mean std sum isnan isfinite isinf histogram bincount percentile quantile allclose "
    "array_equal count_nonzero nanmin nanmax nanmean any all value_counts describe Counter issubset "
    "issuperset amin amax ptp median nunique".split())
SHAPE_CHECKS = frozenset("len exists isfile is_file".split())
EXISTENCE_CHECKS = frozenset("exists isfile is_file".split())
SHAPE_ATTRS = frozenset("shape size ndim".split())
# Properties of the input a compatibility check looks at (at least two kinds).
COMPAT_PROPS = {
    "shape": "shape", "ndim": "shape", "dtype": "dtype", "get_data_dtype": "dtype", "zooms": "spacing",
    "get_zooms": "spacing", "pixdim": "spacing", "spacing": "spacing", "GetSpacing": "spacing",
    "PixelSpacing": "spacing", "affine": "orientation", "aff2axcodes": "orientation",
    "GetDirection": "orientation", "min": "intensity", "max": "intensity", "mean": "intensity",
    "std": "intensity", "percentile": "intensity", "mode": "dtype",
}
# Obtaining weights or a model from a file or a hub.
WEIGHT_LOADERS = frozenset(
    "load_state_dict from_pretrained hf_hub_download snapshot_download load_weights load_model load_learner "
    "InferenceSession load_checkpoint load_state_dict_from_url".split())
WEIGHT_LOADER_CALLS = frozenset(
    "torch.load torch.jit.load joblib.load pickle.load torch.hub.load monai.bundle.download "
    "keras.models.load_model tensorflow.keras.models.load_model".split())
WEIGHT_FILE = re.compile(r"\.(pt|pth|ckpt|safetensors|bin|onnx|h5|hdf5|pkl|joblib|npz|keras|tar)$", re.I)
# Where model classes live: calling a capitalised name from these builds a model.
MODEL_MODULES = re.compile(r"^(monai\.(networks|bundle|apps)|torchvision\.models|timm|transformers|"
                           r"segmentation_models_pytorch|ultralytics|sklearn|xgboost|lightgbm|nnunet\w*|"
                           r"segment_anything|open_clip|torch\.nn)\b")
MODEL_CALL_METHODS = frozenset("predict predict_proba forward generate infer inference segment "
                               "detect classify transform".split())
DEVICE_CALLS = frozenset("to cuda device is_available set_device".split())
DEVICE_KEYWORDS = frozenset("device map_location device_map".split())
TRAINING_METHODS = frozenset("backward fit train_on_batch partial_fit".split())
# In-place tensor updates: on a model's parameters (p.data.sub_(lr * p.grad)) they are training.
INPLACE_UPDATES = frozenset("sub_ add_ mul_ addcmul_ addcdiv_ copy_ lerp_".split())
INSTALLERS = ("pip", "pip3", "conda", "mamba", "apt", "apt-get", "uv")
ENV_COMMANDS = frozenset("nvidia-smi nproc nvcc lscpu free".split())
PYTHONS = re.compile(r"^(python[\d.]*|.*/python[\d.]*)$")
# A file name that picks one case: a media file with a number in its name (case_000.nii.gz).
CASE_FILE = re.compile(r"^[\w.-]*\d[\w.-]*\.(nii(\.gz)?|png|jpe?g|tiff?|dcm|npy|mha|mhd|nrrd|bmp|json|txt|ya?ml)$",
                       re.I)
OUTPUT_MARKERS = ("AMB_OUTPUT_DIR", "/workspace/outputs")
PLAN_FILES = ("plan.md", "plan.png")


def plumbing_module(dotted: str) -> bool:
    return dotted.split(".")[0] in PLUMBING_MODULES

# The result probe's kinds of breakage (replays/probe.py writes them, deciding/heuristic.py reads them), in
# the order a real check most often catches them: NaN in an image, a label outside the set, zeros last.
VALUE_KINDS = ("nan", "labels", "zeros")
KINDS = VALUE_KINDS + ("shape",)
