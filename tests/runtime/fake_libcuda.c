// A stand-in for NVIDIA's driver library: the entry points
// ffi/cuda/cuda_driver.cc loads from libcuda.so.1, each counting its calls,
// and nothing done on a device. Loaded in place of the real one (a test
// process's LD_LIBRARY_PATH), it lets the CUDA callback handler's host path
// run on a machine without a GPU: the contexts it pushes and pops, the
// copies, waits and synchronizations it asks for, a stream being captured.
// The fake_cuda_* functions are the tests' side (tests/runtime/test_fake_driver.py).
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef int CUresult;
enum { kSuccess = 0, kErrorInvalidContext = 201 };

enum Entry {
  kInit, kMemcpyDtoD, kMemcpyHtoD, kMemcpyDtoH, kMemset, kStreamSynchronize,
  kCtxSynchronize, kEventCreate, kEventRecord, kStreamWaitEvent, kEventDestroy,
  kStreamGetCtx, kCtxPush, kCtxPop, kCtxGetCurrent, kStreamIsCapturing, kStreamGetCaptureInfo,
  kGraphGetNodes, kEntries
};
static const char* const kNames[kEntries] = {
    "cuInit", "cuMemcpyDtoDAsync", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync",
    "cuMemsetD8Async", "cuStreamSynchronize", "cuCtxSynchronize", "cuEventCreate",
    "cuEventRecord", "cuStreamWaitEvent", "cuEventDestroy", "cuStreamGetCtx",
    "cuCtxPushCurrent", "cuCtxPopCurrent", "cuCtxGetCurrent", "cuStreamIsCapturing",
    "cuStreamGetCaptureInfo", "cuGraphGetNodes"};

static int64_t counts[kEntries];
static int capture_status;  // CU_STREAM_CAPTURE_STATUS: 0 none, 1 active, 2 invalidated
static size_t captured_nodes;  // in the graph being captured: what the work "launched" added
static char the_graph;
// Every stream belongs to one context; each thread has its own stack of
// current contexts, as the driver keeps them.
static char the_context;
static _Thread_local void* stack[64];
static _Thread_local int depth;

static CUresult Count(enum Entry entry) {
  __atomic_add_fetch(&counts[entry], 1, __ATOMIC_RELAXED);
  return kSuccess;
}

CUresult cuInit(unsigned flags) { (void)flags; return Count(kInit); }

CUresult cuGetErrorString(CUresult error, const char** text) {
  *text = error == kErrorInvalidContext ? "fake: invalid context" : "fake: error";
  return kSuccess;
}

CUresult cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t bytes, void* stream) {
  (void)dst, (void)src, (void)bytes, (void)stream;
  return Count(kMemcpyDtoD);
}

CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void* src, size_t bytes, void* stream) {
  (void)dst, (void)src, (void)bytes, (void)stream;
  return Count(kMemcpyHtoD);
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, uint64_t src, size_t bytes, void* stream) {
  (void)src, (void)stream;
  memset(dst, 0, bytes);  // what a device of zeros would hold
  return Count(kMemcpyDtoH);
}

CUresult cuMemsetD8Async(uint64_t dst, unsigned char value, size_t bytes, void* stream) {
  (void)dst, (void)value, (void)bytes, (void)stream;
  return Count(kMemset);
}

CUresult cuStreamSynchronize(void* stream) { (void)stream; return Count(kStreamSynchronize); }
CUresult cuCtxSynchronize(void) { return Count(kCtxSynchronize); }

CUresult cuEventCreate(void** event, unsigned flags) {
  (void)flags;
  *event = &the_context;  // any non-null handle
  return Count(kEventCreate);
}

CUresult cuEventRecord(void* event, void* stream) {
  (void)event, (void)stream;
  return Count(kEventRecord);
}

CUresult cuStreamWaitEvent(void* stream, void* event, unsigned flags) {
  (void)stream, (void)event, (void)flags;
  return Count(kStreamWaitEvent);
}

CUresult cuEventDestroy_v2(void* event) { (void)event; return Count(kEventDestroy); }

CUresult cuStreamGetCtx(void* stream, void** context) {
  (void)stream;
  *context = &the_context;
  return Count(kStreamGetCtx);
}

CUresult cuCtxPushCurrent_v2(void* context) {
  if (depth == (int)(sizeof(stack) / sizeof(stack[0]))) return kErrorInvalidContext;
  stack[depth++] = context;
  return Count(kCtxPush);
}

CUresult cuCtxPopCurrent_v2(void** context) {
  if (depth == 0) return kErrorInvalidContext;  // popping what nobody pushed
  *context = stack[--depth];
  return Count(kCtxPop);
}

CUresult cuCtxGetCurrent(void** context) {
  *context = depth > 0 ? stack[depth - 1] : NULL;
  return Count(kCtxGetCurrent);
}

CUresult cuStreamIsCapturing(void* stream, int* status) {
  (void)stream;
  *status = capture_status;
  return Count(kStreamIsCapturing);
}

CUresult cuStreamGetCaptureInfo_v2(void* stream, int* status, unsigned long long* id,
                                   void** graph, const void** dependencies,
                                   size_t* num_dependencies) {
  (void)stream;
  *status = capture_status;
  if (id != NULL) *id = 1;
  if (graph != NULL) *graph = capture_status == 1 ? &the_graph : NULL;
  if (dependencies != NULL) *dependencies = NULL;
  if (num_dependencies != NULL) *num_dependencies = 0;
  return Count(kStreamGetCaptureInfo);
}

CUresult cuGraphGetNodes(void* graph, void* nodes, size_t* count) {
  (void)graph, (void)nodes;
  *count = captured_nodes;
  return Count(kGraphGetNodes);
}

// -- the tests' side ------------------------------------------------------------
int64_t fake_cuda_count(const char* name) {
  for (int i = 0; i < kEntries; ++i) {
    if (strcmp(name, kNames[i]) == 0) return __atomic_load_n(&counts[i], __ATOMIC_RELAXED);
  }
  return -1;
}

// The calling thread's current contexts.
int fake_cuda_context_depth(void) { return depth; }

void fake_cuda_set_capture_status(int status) { capture_status = status; }

// What a kernel launched during a capture does to its graph.
void fake_cuda_launch(void) { captured_nodes += 1; }
