/* The DLPack structs (the public dlpack.h, v0.8, ABI-compatible), declared
 * here so the build needs no external header. A producer hands a consumer a
 * PyCapsule named "dltensor" holding a DLManagedTensor *; the consumer renames
 * it "used_dltensor" and later calls the deleter exactly once. A capsule that
 * is never consumed calls the deleter from its own destructor. */
#ifndef EAGERVM_PY_DLPACK_H
#define EAGERVM_PY_DLPACK_H

#include <stdint.h>

#define DLPACK_VERSION 80

typedef enum { kDLCPU = 1 } DLDeviceType;

typedef struct {
    int32_t device_type; /* DLDeviceType */
    int32_t device_id;
} DLDevice;

typedef enum {
    kDLInt = 0,
    kDLUInt = 1,
    kDLFloat = 2,
    kDLOpaqueHandle = 3,
    kDLBfloat = 4,
    kDLComplex = 5,
    kDLBool = 6,
} DLDataTypeCode;

typedef struct {
    uint8_t code;   /* DLDataTypeCode */
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL means C-contiguous */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#endif
