# The full kit's Makefile: the candidate kit's (full_kit/candidate/Makefile: the set-up, grade,
# grade-all, test, lint), then what only the full kit has. On Linux the set-up also installs the
# cluster extra (Ray, for grade-all --ray and its tests).

comma      := ,
EXTRAS     := $(if $(filter Linux,$(shell uname -s)),$(comma)cluster)
include full_kit/candidate/Makefile

.PHONY: candidate-kit simulate demo gpu-check bench

candidate-kit: $(READY) ## Build the bundle for candidates (no answer key) under dist/.
	$(BIN)/python -m full_kit.bundle

simulate: $(KIT) ## Static vs continuous batching, contiguous vs paged memory: table and plots.
	$(BIN)/python -m full_kit.simulate $(if $(OUT),--out $(OUT))

demo: $(KIT) ## Serve a trace with a tiny transformer built on the answer key's parts.
	$(BIN)/python -m full_kit.demo

gpu-check: $(KIT) ## On a CUDA machine: kernel checks natively, then the timing suite's table.
	$(BIN)/python -m full_kit.gpu_check $(if $(OUT),--out $(OUT))

bench: $(KIT) ## Run the timing benchmarks (pytest-benchmark).
	$(BIN)/python -m pytest -m bench --benchmark-columns=min,median,max,rounds
