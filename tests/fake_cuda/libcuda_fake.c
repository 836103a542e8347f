/* A stand-in for libcuda.so.1 (tests only): the driver calls tools/run_hopper_kernels.py makes,
 * compiled against the real cuda.h so the structures are read with the C layout.  Each call is
 * written to $FAKE_CUDA_LOG as one line; a launch logs its config, attributes and every
 * parameter's bytes (sizes registered by the fake cupy from the PTX).  $FAKE_CUDA_HANG / _FAIL
 * name a module whose launch never completes / completes with CUDA_ERROR_ILLEGAL_ADDRESS, _BLOCK one
 * whose cuStreamQuery never returns;
 * $FAKE_CUDA_REFUSE_CLUSTER=1 refuses a cluster attribute on a kernel with .reqnctapercluster. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXF 256
static struct { int n; int sizes[128]; int reqc; char module[128]; } funcs[MAXF];
static int state;          /* 0 idle/done, 1 hang, 2 failed, 3 blocked */

static FILE *out(void) {
    static FILE *f;
    if (!f) { const char *p = getenv("FAKE_CUDA_LOG"); f = fopen(p ? p : "/dev/null", "a"); setvbuf(f, NULL, _IOLBF, 0); }
    return f;
}

static int env_is(const char *var, const char *module) {
    const char *v = getenv(var);
    return v && module && strcmp(v, module) == 0;
}

int fake_register(int id, int n, const int *sizes, int reqc, const char *module) {
    if (id < 0 || id >= MAXF || n > 128) return 1;
    funcs[id].n = n; funcs[id].reqc = reqc;
    memcpy(funcs[id].sizes, sizes, sizeof(int) * n);
    snprintf(funcs[id].module, sizeof funcs[id].module, "%s", module);
    return 0;
}

CUresult cuGetErrorName(CUresult e, const char **s) {
    switch (e) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_READY: *s = "CUDA_ERROR_NOT_READY"; return CUDA_SUCCESS;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; return CUDA_SUCCESS;
    default: *s = "CUDA_ERROR_UNKNOWN"; return CUDA_SUCCESS;
    }
}

CUresult cuDriverGetVersion(int *v) { *v = CUDA_VERSION; return CUDA_SUCCESS; }
CUresult cuCtxGetCurrent(CUcontext *c) { *c = (CUcontext)(uintptr_t)0x1000; return CUDA_SUCCESS; }

CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
    int id = (int)(uintptr_t)f - 1;
    fprintf(out(), "setattr %s %d %d\n", funcs[id].module, (int)a, v);
    return (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && v <= 232448) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f) { *v = 1000 + (int)a; return CUDA_SUCCESS; }

/* the fake map: qword 0 address, 1 the enums, 2..6 globalDim, 7..10 globalStrides, 11..15 box | elementStride << 32 */
CUresult cuTensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType dt, cuuint32_t rank, void *addr,
                                const cuuint64_t *dim, const cuuint64_t *strides, const cuuint32_t *box,
                                const cuuint32_t *es, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    if (((uintptr_t)m) % 64 || rank < 1 || rank > 5 || ((uintptr_t)addr) % 16) return CUDA_ERROR_INVALID_VALUE;
    cuuint64_t *q = m->opaque;
    memset(q, 0, 128);
    q[0] = (cuuint64_t)(uintptr_t)addr;
    q[1] = (cuuint64_t)dt | (cuuint64_t)rank << 8 | (cuuint64_t)il << 16 | (cuuint64_t)sw << 24 |
           (cuuint64_t)l2 << 32 | (cuuint64_t)oob << 40;
    for (cuuint32_t i = 0; i < rank; i++) {
        q[2 + i] = dim[i];
        if (i + 1 < rank) q[7 + i] = strides[i];
        q[11 + i] = (cuuint64_t)box[i] | (cuuint64_t)es[i] << 32;
    }
    return CUDA_SUCCESS;
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    int id = (int)(uintptr_t)f - 1;
    FILE *o = out();
    int cluster = 0;
    for (unsigned i = 0; i < c->numAttrs; i++)
        if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) cluster = 1;
    if (cluster && funcs[id].reqc && getenv("FAKE_CUDA_REFUSE_CLUSTER")) {
        fprintf(o, "refused %s\n", funcs[id].module);
        return CUDA_ERROR_INVALID_VALUE;
    }
    fprintf(o, "launch %s grid %u %u %u block %u %u %u smem %u stream %d extra %d attrs %u",
            funcs[id].module, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
            c->sharedMemBytes, c->hStream != NULL, extra != NULL, c->numAttrs);
    for (unsigned i = 0; i < c->numAttrs; i++) {
        const CUlaunchAttribute *a = &c->attrs[i];
        if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            fprintf(o, " cluster=%u,%u,%u", a->value.clusterDim.x, a->value.clusterDim.y, a->value.clusterDim.z);
        else if (a->id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
            fprintf(o, " pdl=%d", a->value.programmaticStreamSerializationAllowed);
        else
            fprintf(o, " attr%d", (int)a->id);
    }
    fprintf(o, " params");
    for (int i = 0; i < funcs[id].n; i++) {
        const unsigned char *p = (const unsigned char *)params[i];
        fputc(' ', o);
        for (int b = 0; b < funcs[id].sizes[i]; b++) fprintf(o, "%02x", p[b]);
    }
    fputc('\n', o);
    state = env_is("FAKE_CUDA_HANG", funcs[id].module) ? 1 : env_is("FAKE_CUDA_FAIL", funcs[id].module) ? 2 :
            env_is("FAKE_CUDA_BLOCK", funcs[id].module) ? 3 : 0;
    return CUDA_SUCCESS;
}

CUresult cuStreamQuery(CUstream s) {
    while (state == 3) pause();
    return state == 1 ? CUDA_ERROR_NOT_READY : state == 2 ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream s) { return cuStreamQuery(s); }

CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, CUjit_option *opts, void **vals) {
    for (unsigned i = 0; i < n; i++) {
        if (opts[i] == CU_JIT_ERROR_LOG_BUFFER) strcpy((char *)vals[i], "fake JIT error log");
        if (opts[i] == CU_JIT_INFO_LOG_BUFFER) strcpy((char *)vals[i], "fake JIT info log");
        if (opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES && (uintptr_t)vals[i] < 64) return CUDA_ERROR_INVALID_VALUE;
    }
    *m = (CUmodule)(uintptr_t)0x2000;
    return CUDA_SUCCESS;
}
CUresult cuModuleUnload(CUmodule m) { return CUDA_SUCCESS; }
