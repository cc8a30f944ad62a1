// Element type of the KV store, shared by the kernels that read or write it (the host
// prepends this file). -DKV_HALF stores keys and values as 16-bit floats (half the memory;
// vload_half/vstore_half are core OpenCL, so this works with or without cl_khr_fp16, and
// all arithmetic stays fp32); otherwise they are fp32.
#ifdef KV_HALF
typedef half kv_t;
#define KV_LOAD4(i, p) vload_half4((i), (p))
#define KV_LOAD16(i, p) vload_half16((i), (p))
#define KV_LOAD(p) vload_half(0, (p))
#define KV_STORE(v, p) vstore_half((v), 0, (p))
#else
typedef float kv_t;
#define KV_LOAD4(i, p) vload4((i), (p))
#define KV_LOAD16(i, p) vload16((i), (p))
#define KV_LOAD(p) (*(p))
#define KV_STORE(v, p) (*(p) = (v))
#endif
