"""What the judges and detectors look for in text: the plan, and the errors cells print.

Code is never matched with these: cells are read as code (code.py, vocabulary.py), so a comment
or a string saying "pilot" or "torch.load" is no evidence of anything.
"""
from __future__ import annotations

import re

MODEL_WORDS = re.compile(
    r"\b(u-?net|unetr|swin-?unetr|nn-?u-?net|segresnet|segformer|resnet\d*|densenet\d*|efficientnet|vit|"
    r"transunet|medsam|sam|totalsegmentator|mednext|attention u-?net|v-?net|drunet|dncnn|swin2sr|swinir|"
    r"red-cnn|bm3d|llava(-med)?|blip-?2?|qwen[\w.-]*|gpt-?4\w*|chexagent|radfm|medgemma|yolo\w*|"
    r"faster r-?cnn|retinanet|detr|convnext|biomedclip|clip|pix2pix|cyclegan|diffusion|espcn|srcnn|"
    r"otsu|threshold\w*|random forest|xgboost|logistic regression|gaussian|median filter|bicubic)\b",
    re.I,
)
# What a chosen method is called when it is not a named model (a shipped classifier, a classical filter).
METHOD_NOUNS = re.compile(r"\b(models?|methods?|network|architecture|classifier|detector|segmenter|filter|"
                          r"denoiser|answerer|retriever|writer|interpolation|algorithm|backbone|checkpoint|"
                          r"weights|regressor|estimator|rules?|heuristic|centroids?|card|k-?nn|nearest[- ]\w+|cnn|"
                          r"tv|total[- ]variation|non-local means|nl-?means|approach|pipeline|option|candidate)\b", re.I)
# A sentence that decides: the verbs and labels a plan chooses with ("Decision: ...", "I prefer ...", "-> I use this").
CHOICE_WORDS = re.compile(
    r"\b(use|using|uses|chose|choose|chosen|choice|decision|decided?|select\w*|pick\w*|go(ing)? with|went with|"
    r"adopt\w*|prefer\w*|opt(s|ed|ing)? for|settled? on|stick with|rely on|relying on|fall ?back (to|on)|"
    r"(try|tries|trying) [\w-]+( [\w-]+)? first|final (pick|model|method|answer)|winner)\b|(?:->|→|<-|←|=>)\s*\w", re.I)
# A reason given for a choice (the rubric: "chooses ... and says why").
REASON_WORDS = re.compile(
    r"\b(because|since|as (it|its|this|they|the|there|no|only)|due to|given|so that|thanks to|why|reason\w*|only|"
    r"which|it (is|has|was|covers|runs|knows|needs|works|fits|matches|handles|keeps|preserves|removes|understands|"
    r"generalises|generalizes)|better|best|stronger|faster|fast|cheap\w*|fitted|tuned|trained|pre-?trained|"
    r"fits?|suits?|suited|built for|made for|designed for|no (training|weights)|offline|available|ready|"
    # ... or what rules the alternatives out: "alternatives (need GPUs and downloads)"
    r"needs?|requires?|too \w+|unavailable|gated|heavy|slow|cannot|can't)\b", re.I)
STEP_LINE = re.compile(r"^\s*(\d+[.)]|[-*])\s+\S", re.M)
STEP_LABEL = re.compile(r"^\s*(#+\s*)?(\*\*)?(step|stage|phase)\s*\d+\b", re.I)
ARROWS = re.compile(r"\s*(?:->|→|=>|⇒|-->|⟶)\s*")
# What a pipeline step does, as its first word ("load each slice, denoise, save as NIfTI, check the values").
STEP_VERBS = re.compile(
    r"^(?:(?:and|then|and then|finally|first|next|lastly)\s+)?(load|read|open|inspect|check|verify|validate|build|"
    r"construct|instantiate|run|apply|predict|infer|segment|classify|denoise|answer|restore|enhance|normali[sz]e|"
    r"standardi[sz]e|z-?score|resample|resize|crop|pad|threshold|argmax|softmax|post-?process|pilot|write|save|"
    r"export|store|submit|compute|extract|convert|evaluate|score|compare|plot|draw|move|place|put|map|merge|"
    r"assemble|collect|pick|choose|select|fit|fall ?back|retry|resume|copy|cast|clip|stack|split|loop|iterate|"
    r"review|confirm|test|ensure|make)\b", re.I)
STEP_SPLIT = re.compile(r"\s*(?:[,;]|\bthen\b|(?:->|→|=>))\s*", re.I)
# Words that order a plan's sentences: "First I load ..., then ..., finally ...".
SEQUENCE_WORDS = re.compile(r"\b(first(ly)?|second(ly)?|third(ly)?|then|next|after (that|this|which)|afterwards|"
                            r"finally|lastly|last(ly)?,|once (that|this|done|it)|before (that|writing|submitting))\b", re.I)
ENV_FAILURE = re.compile(r"ModuleNotFoundError|ImportError|No matching distribution|ERROR: Could not|ResolutionImpossible|"
                         r"pip\S* .*error|command not found", re.I)
TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
OOM = re.compile(r"MemoryError|out of memory|OutOfMemory|Killed|oom-kill|Cannot allocate memory", re.I)
DOWNLOAD_FAIL = re.compile(r"HTTPError|URLError|ConnectionError|Could not resolve host|Name or service not known|"
                           r"Temporary failure in name resolution|Max retries exceeded|404 Client Error|"
                           r"403 Client Error|Failed to download|Network is unreachable|curl: \(\d+\)", re.I)
# VQA's S1 (eval_vqa llm_judge.py s1e / s1f): how a raw model output becomes the answer, and a smoke path.
_NORMALISE = r"(normali[sz]\w*|canonicali[sz]\w*|extract\w*|pars(e|es|ed|er|ing)|lower-?cas\w*|strip\w*|map(s|ped|ping)?|" \
    r"match(es|ed|ing)?|clean\w*|convert\w*|snap\w*)"
_ANSWER = r"(answers?|outputs?|responses?|generations?|text|labels?|letters?|options?|choices?|predictions?)"
# the verb and what it works on, four words apart at most, either order ("map the raw output to an option", "answers
# are normalised"), or a post-processor / answer extraction by name ("extract the images" is no normalisation)
_GAP = r"(?:\s+[\w'-]+){0,4}?\s+"  # up to four words between them
NORMALISE_WORDS = re.compile(rf"\b{_NORMALISE}\b{_GAP}{_ANSWER}\b|\b{_ANSWER}\b{_GAP}{_NORMALISE}\b|"
                             r"\bpost-?process\w*|\banswer (extraction|normali[sz]ation|parsing)\b", re.I)
COUNT = r"(\d{1,2}|one|two|three|four|five|ten|twenty)"
# a smoke test, pilot or dry run, or a run on the first / a few / N of the questions ("on images" is no count)
SMOKE_WORDS = re.compile(
    rf"\b(smoke|pilot\w*|sanity|dry[- ]run|trial run|sample[- ]limit|subset)\b|\b(first( {COUNT}| few)?|a few|"
    rf"on {COUNT}|{COUNT} of the) (questions?|samples?|cases?|images?|examples?)\b", re.I)
