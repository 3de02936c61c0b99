"""Names the serving modules share; imports nothing, so every module may import it.

`cli` (argparse only, loaded by the package command line before TensorFlow)
and the modules that do the work (`check`, `servable`) both need these; kept
here, below both, neither has to import the other.
"""

SERVING_TAG = "serve"
"""The tag set of the exports' MetaGraph: the one tensorflow_model_server loads by default."""
# A SavedModel directory holds one of these (binary, or text).
SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")

# make-servable's exit statuses (check-serving uses 0, 1 and 2 alike).
EXIT_OK = 0  # DST written; every signature run and bitwise equal (or --allow-unverified / --no-verify said)
EXIT_FAILED = 1  # the stock-op check or the verification failed; DST not written
EXIT_ERROR = 2  # a bad SRC or DST, or an OS error; DST not written
EXIT_UNVERIFIED = 3  # some signature could not be run, so equality is unproven; DST not written
