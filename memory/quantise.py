"""Build the 8-bit copy of an ONNX text model that embeds texts (memory.embedders.LocalMiniLM).

Run as a script of its own (`python memory/quantise.py SOURCE TARGET`), in a process of its own:
building takes about 2 seconds and half a gigabyte at its peak, which a web process should not
keep, and a crash in the quantiser ends this process rather than the caller's. It needs
onnxruntime and onnx, not Django.

The copy is written in a scratch directory beside TARGET, flushed to disk, and renamed into place:
nobody ever reads half a file, even after a power cut. The caller holds a lock so that one
process builds at a time (memory.embedders.quantised_copy).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

# What the name of a copy says about how it was made: a change here builds a new copy.
RECIPE = "dynamic-int8-per-channel-v1"


def build(source: Path, target: Path) -> None:
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # The quantiser reports every tensor it passes over, and advises a pre-processing step meant
    # for convolutional image models, on the root logger: nothing in either asks for action.
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".building-") as scratch:
        # The shipped graph widens its int8 weights at run time (Cast, Mul): onnxruntime's basic
        # optimisations fold them into float weights, which the quantiser sees as constants.
        folded = Path(scratch) / "folded.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        options.intra_op_num_threads = 1
        ort.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])
        built = Path(scratch) / "quantised.onnx"
        quantize_dynamic(folded, built, weight_type=QuantType.QInt8, per_channel=True)
        with open(built, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(built, target)
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python memory/quantise.py SOURCE.onnx TARGET.onnx")
    build(Path(sys.argv[1]), Path(sys.argv[2]))
