# Thin wrapper over CMake. Every target first makes sure the Debian packages
# are installed (scripts/bootstrap is idempotent and quiet when nothing is missing).
#
#   make          build ./build (RelWithDebInfo)
#   make demo     build, then tune the built-in GNN latency predictor end to end (cgq run)
#   make test     build ./build and ./build-asan (ASan+UBSan), run every test (release_launch: ./build's)
#   make bench    build, then print throughput figures and the coordinator restart time
#   make fuzz     build ./build-fuzz with clang's libFuzzer, fuzz each parser FUZZ_TIME s
#   make clean

JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
CTEST_ARGS ?=
FUZZ_TIME ?= 60

.PHONY: all build bootstrap demo test bench fuzz clean format

all: build

bootstrap:
	@./scripts/bootstrap

build: bootstrap
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@echo "building cgq in ./build (log: build/build.log) ..."
	@cmake --build build -j $(JOBS) > build/build.log 2>&1 || { tail -n 40 build/build.log; exit 1; }

build-asan/CMakeCache.txt:
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCGQ_SANITIZE=ON -DCGQ_WERROR=ON >/dev/null

test: build build-asan/CMakeCache.txt
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

demo: build
	@./build/bin/cgq run orchestration/examples/predictor/tune.yaml --format json \
		| python3 orchestration/examples/predictor/leaderboard.py

bench: build
	@./bench/run
	@python3 bench/restart.py
	@python3 bench/million.py
	@python3 bench/nodes.py
	@python3 bench/dispatch.py
	@if command -v valgrind >/dev/null; then python3 bench/callgrind.py; \
	 else echo "bench: valgrind not installed: no instruction count per trial (bench/callgrind.py)"; fi

fuzz: bootstrap
	@python3 tests/fuzz/run.py --build-dir build-fuzz --time $(FUZZ_TIME) --jobs $(JOBS)

clean:
	rm -rf build build-asan build-fuzz
