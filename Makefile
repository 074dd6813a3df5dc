# flare — build, test, demo, bench. Every entry point installs missing Debian packages first
# (scripts/deps.sh: one dpkg-query when nothing is missing).
#
#   make            library (static + shared) and the flare binary, in build/
#   make test       unit + conformance + parity tests, then again under ASan+UBSan, fuzz smoke
#   make demo       train LeNet-5 on Fashion-MNIST briefly, evaluate, show the layer table
#   make bench      benchmarks, printed as ratios against named baselines
#
# Sources are found by wildcard: a new src/<module>/*.c, src/agents/<module>/*.c, tests/test_*.c
# or bench/*.c needs no edit here.

CC      ?= gcc
Q       ?= @
MODE    ?= release
BUILD   ?= build
PKGS    := openblas libprotobuf-c libcjson libpng zlib libcurl libmicrohttpd
WARN    := -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wstrict-prototypes
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -fPIC -Iinclude -Isrc -I$(BUILD)/gen $(WARN) \
               $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
ifeq ($(MODE),san)
  CFLAGS_MODE := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
                 -fno-omit-frame-pointer
  LDFLAGS_MODE := -fsanitize=address,undefined
else
  CFLAGS_MODE := -O3 -g
  LDFLAGS_MODE :=
endif
CFLAGS  := $(CFLAGS_BASE) $(CFLAGS_MODE) $(EXTRA_CFLAGS)
LDLIBS  := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm -lpthread
LDFLAGS := $(LDFLAGS_MODE)

PROTO   := /usr/include/onnx/onnx.proto
GEN_C   := $(BUILD)/gen/onnx/onnx.pb-c.c
GEN_H   := $(BUILD)/gen/onnx/onnx.pb-c.h
OTLP_PROTO := proto/otlp_trace.proto
OTLP_GEN_C := $(BUILD)/gen/otlp/otlp_trace.pb-c.c
OTLP_GEN_H := $(BUILD)/gen/otlp/otlp_trace.pb-c.h

LIB_SRC := $(filter-out src/cli/%,$(wildcard src/*/*.c src/agents/*/*.c))
CLI_SRC := $(wildcard src/cli/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/onnx.pb-c.o $(BUILD)/obj/gen/otlp_trace.pb-c.o
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
EXAMPLE_SRC := $(wildcard examples/agents/*.c)
EXAMPLE := $(BUILD)/examples/taskforce
HTTP_EXAMPLE := $(BUILD)/examples/agents-http
# examples/systems/: more systems with planted defects (helpdesk, coder, pipeline; scheduler: hangs)
SYSTEMS := $(addprefix $(BUILD)/examples/,helpdesk coder pipeline scheduler)
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all deps test test-fast test-san demo bench clean fuzz-smoke check-frameworks
all: deps $(BUILD)/flare $(BUILD)/libflare.so $(EXAMPLE) $(HTTP_EXAMPLE) $(SYSTEMS)

deps:
	@scripts/deps.sh build

$(GEN_C) $(GEN_H): $(PROTO)
	@mkdir -p $(BUILD)/gen/onnx
	cd $(dir $(PROTO)) && protoc-c --c_out=$(abspath $(BUILD)/gen/onnx) onnx.proto

$(BUILD)/obj/gen/onnx.pb-c.o: $(GEN_C)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) -Wno-error -c $< -o $@

# the OTLP trace messages, written for the project from the OTLP field numbers (proto/)
$(OTLP_GEN_H): $(OTLP_PROTO)
	@mkdir -p $(BUILD)/gen/otlp
	protoc-c --c_out=$(abspath $(BUILD)/gen/otlp) -Iproto $(notdir $(OTLP_PROTO))
$(OTLP_GEN_C): $(OTLP_GEN_H)

$(BUILD)/obj/gen/otlp_trace.pb-c.o: $(OTLP_GEN_C)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) -Wno-error -c $< -o $@

$(BUILD)/obj/%.o: %.c $(GEN_H) $(OTLP_GEN_H)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libflare.a: $(LIB_OBJ)
	@rm -f $@
	@echo "  AR      $@"
	$(Q)ar rcs $@ $^

$(BUILD)/libflare.so: $(LIB_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/flare: $(CLI_OBJ) $(BUILD)/libflare.a
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The example agent system flare's demo, tests and benchmarks fuzz (a separate program: it
# speaks the protocol over stdin/stdout and links only cJSON).
$(EXAMPLE): $(EXAMPLE_SRC) $(wildcard examples/agents/*.h)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) -std=c11 $(CFLAGS_MODE) $(WARN) -o $@ $(EXAMPLE_SRC) $(LDFLAGS) -lcjson -lm

# Each system of examples/systems/ is its own program, sharing sys.c's request loop.
$(SYSTEMS): $(BUILD)/examples/%: examples/systems/%.c examples/systems/sys.c examples/systems/sys.h
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) -std=c11 $(CFLAGS_MODE) $(WARN) -o $@ examples/systems/sys.c $< $(LDFLAGS) -lcjson

# The same system behind HTTP (examples/agents-http/: wraps any JSON-lines target), for
# --target URL.
$(HTTP_EXAMPLE): examples/agents-http/server.c
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) -std=c11 $(CFLAGS_MODE) $(WARN) -o $@ $< $(LDFLAGS) -lcjson

# Tests and benchmarks are compiled and linked in one step; -MMD -MF writes what each one
# includes (headers, src/cli/flags.def) to $@.d, included below, so editing any of those
# rebuilds it. Both relink when libflare.a changes.
$(BUILD)/tests/%: tests/%.c tests/testutil.h $(BUILD)/libflare.a
	@mkdir -p $(dir $@)
	@echo "  TEST    $@"
	$(Q)$(CC) $(CFLAGS) -Itests -MMD -MP -MF $@.d -MT $@ -o $@ $< $(BUILD)/libflare.a $(LDFLAGS) $(LDLIBS) -lcmocka

$(BUILD)/bench/%: bench/%.c $(BUILD)/libflare.a
	@mkdir -p $(dir $@)
	@echo "  BENCH   $@"
	$(Q)$(CC) $(CFLAGS) -MMD -MP -MF $@.d -MT $@ -o $@ $< $(BUILD)/libflare.a $(LDFLAGS) $(LDLIBS)

# Tests: release build, then the same tests under AddressSanitizer + UndefinedBehaviorSanitizer,
# then each fuzz harness for a few seconds.
test:
	@scripts/deps.sh test
	$(MAKE) --no-print-directory test-fast
	$(MAKE) --no-print-directory test-san
	$(MAKE) --no-print-directory fuzz-smoke

test-fast: $(BUILD)/flare $(EXAMPLE) $(HTTP_EXAMPLE) $(SYSTEMS) $(TEST_BIN)
	@tests/run.sh $(BUILD)

test-san:
	$(MAKE) --no-print-directory MODE=san BUILD=build-san test-fast

fuzz-smoke:
	@fuzz/smoke.sh

# The framework examples' targets (every planted defect, every declared edge, no false spec
# violation, through spans alone): tests/test_otel_frameworks.c, part of test-fast like every
# tests/test_*.c; this runs it alone.
check-frameworks: $(BUILD)/flare
	@scripts/deps.sh test
	$(MAKE) --no-print-directory $(BUILD)/tests/test_otel_frameworks
	PATH="$(CURDIR)/build/node/bin:$$PATH" FLARE_BIN=$(BUILD)/flare $(BUILD)/tests/test_otel_frameworks

demo: all
	@scripts/demo.sh $(BUILD)/flare

bench:
	@scripts/deps.sh bench
	$(MAKE) --no-print-directory $(BUILD)/flare $(EXAMPLE) $(SYSTEMS) $(BENCH_BIN)
	@bench/run.sh $(BUILD)

clean:
	rm -rf build build-san build-fuzz

-include $(shell find $(BUILD)/obj $(BUILD)/tests $(BUILD)/bench -name '*.d' 2>/dev/null)
# A test or benchmark built before it had a .d file is rebuilt once, so that it gets one.
$(foreach b,$(TEST_BIN) $(BENCH_BIN),$(if $(wildcard $(b)),$(if $(wildcard $(b).d),,$(eval $(b): FORCE))))
.PHONY: FORCE
FORCE:
