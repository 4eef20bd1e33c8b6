# cuda_update/module.mk — the updater: build/tierfs-update, build/libtierfs_update.so
# (header cuda_update/tierfs_update.h) and its test programs, included by the
# top-level Makefile.
#
# CUDA: when nvcc is found the fused kernel (adam_cuda.cu) is compiled once for
# sm_80 and sm_90 (+ compute_90 PTX for newer GPUs) and linked with -lcudart;
# otherwise cuda_stub.c stands in and `--device cuda` says the build has no
# CUDA. The sanitizer build (SAN=1) is always CPU-only: ASan and the CUDA
# runtime do not mix.

NVCC ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
TU_OBJDIR := $(BUILD)/obj/cuda_update
TU_LIB_SRC := cuda_update/adam_cpu.c cuda_update/layout.c cuda_update/pipeline.c \
	cuda_update/pipeline_io.c cuda_update/pipeline_open.c
TU_LIB_OBJ := $(TU_LIB_SRC:cuda_update/%.c=$(TU_OBJDIR)/%.pic.o)
TU_CFLAGS := $(CFLAGS) -fPIC
TU_LIBS := -luring -lm -pthread

ifeq ($(SAN),1)
TU_NVCC :=
else
TU_NVCC := $(NVCC)
endif

ifneq ($(TU_NVCC),)
TU_CUDA_HOME := $(patsubst %/bin/nvcc,%,$(TU_NVCC))
TU_CUDA_OBJ := $(TU_OBJDIR)/adam_cuda.o
TU_LIB_OBJ += $(TU_CUDA_OBJ)
TU_CFLAGS += -DTIERFS_HAVE_CUDA
TU_LIBS += -L$(TU_CUDA_HOME)/lib64 -Wl,-rpath,$(TU_CUDA_HOME)/lib64 -lcudart -lstdc++
TU_NVCCFLAGS := -O3 -std=c++14 -Xcompiler -fPIC,-Wall -I. \
	-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90
$(TU_CUDA_OBJ): cuda_update/adam_cuda.cu cuda_update/tierfs_update.h
	@mkdir -p $(dir $@)
	$(TU_NVCC) $(TU_NVCCFLAGS) -c $< -o $@
else
TU_LIB_OBJ += $(TU_OBJDIR)/cuda_stub.pic.o
ifeq ($(SAN),1)
TU_CFLAGS += -DTU_STUB_WHY='"built without CUDA support (the sanitizer build is CPU-only)"'
endif
endif

$(TU_OBJDIR)/%.pic.o: cuda_update/%.c
	@mkdir -p $(dir $@)
	$(CC) $(TU_CFLAGS) -c $< -o $@

$(BUILD)/libtierfs_update.so: $(TU_LIB_OBJ)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(TU_LIBS)

# The tool and the tests link the library by path with an rpath to its
# directory so they run from the build tree without LD_LIBRARY_PATH.
TU_LINK := -L$(BUILD) -ltierfs_update -Wl,-rpath,'$$ORIGIN' $(TU_LIBS)

$(BUILD)/tierfs-update: $(TU_OBJDIR)/main.pic.o $(BUILD)/libtierfs_update.so
	$(CC) $(LDFLAGS) -o $@ $(TU_OBJDIR)/main.pic.o $(TU_LINK)

TU_TESTS := $(patsubst cuda_update/tests/%.c,$(BUILD)/tests/cuda_update/%,$(wildcard cuda_update/tests/test_*.c))
$(BUILD)/tests/cuda_update/%: cuda_update/tests/%.c $(BUILD)/libtierfs_update.so
	@mkdir -p $(dir $@)
	$(CC) $(TU_CFLAGS) $(LDFLAGS) -o $@ $< -L$(BUILD) -ltierfs_update \
		-Wl,-rpath,'$$ORIGIN/../..' $(TU_LIBS) $(shell pkg-config --libs cmocka)

MODULE_ALL += $(BUILD)/tierfs-update $(BUILD)/libtierfs_update.so $(TU_TESTS)
# The test programs' own .d files too: they share a fixture header.
-include $(TU_LIB_OBJ:.o=.d) $(TU_OBJDIR)/main.pic.d $(TU_TESTS:=.d)
