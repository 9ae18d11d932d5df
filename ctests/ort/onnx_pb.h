/*
 * onnx_pb.h - a minimal, bounded reader of the two ONNX protobuf messages the ORT test host needs:
 * TensorProto (the input_*.pb / output_*.pb files of ONNX's node tests) and a summary of
 * ModelProto (which operators and element types a model uses).
 *
 * Nothing here trusts the file: every length is checked against the bytes that remain, element
 * counts against ONNX_PB_MAX_ELEMENTS, dimension counts against ONNX_PB_MAX_DIMS, and files are
 * read only up to ONNX_PB_MAX_FILE bytes. Errors are returned as -1 with a message in `err`.
 * Not thread-safe per object; separate objects may be used from separate threads.
 */
#ifndef CUDAEP_CTESTS_ORT_ONNX_PB_H
#define CUDAEP_CTESTS_ORT_ONNX_PB_H

#include <stddef.h>
#include <stdint.h>

#define ONNX_PB_MAX_FILE ((size_t)256 << 20)      /* largest file read_file accepts */
#define ONNX_PB_MAX_ELEMENTS ((size_t)1 << 26)    /* largest tensor (elements) */
#define ONNX_PB_MAX_DIMS 16
#define ONNX_PB_MAX_OPS 32                        /* distinct operator types remembered */
#define ONNX_PB_NAME 256
#define ONNX_PB_MAX_IO 16                         /* graph inputs and outputs remembered */

/* ONNX TensorProto.DataType values used here (same numbers as ONNXTensorElementDataType). */
enum {
  ONNX_PB_FLOAT = 1,
  ONNX_PB_UINT8 = 2,
  ONNX_PB_INT8 = 3,
  ONNX_PB_UINT16 = 4,
  ONNX_PB_INT16 = 5,
  ONNX_PB_INT32 = 6,
  ONNX_PB_INT64 = 7,
  ONNX_PB_STRING = 8,
  ONNX_PB_BOOL = 9,
  ONNX_PB_FLOAT16 = 10,
  ONNX_PB_DOUBLE = 11,
  ONNX_PB_UINT32 = 12,
  ONNX_PB_UINT64 = 13,
  ONNX_PB_BFLOAT16 = 16
};

/* host_tensor: a dense tensor in host memory. `data` is malloc'ed and owned by the struct
 * (host_tensor_free releases it); elements are stored in the machine's (little-endian) order. */
typedef struct host_tensor {
  char name[ONNX_PB_NAME];
  int32_t data_type;                  /* ONNX_PB_* */
  size_t ndims;
  int64_t dims[ONNX_PB_MAX_DIMS];
  size_t count;                       /* product of dims (1 for a scalar) */
  size_t elem_size;
  void* data;                         /* count * elem_size bytes (non-NULL even when count is 0) */
} host_tensor;

/* onnx_pb_elem_size returns the byte size of a fixed-size element type, 0 for others. */
size_t onnx_pb_elem_size(int32_t data_type);

/* onnx_pb_type_name returns a short name of a data type ("float", "int64", ...). */
const char* onnx_pb_type_name(int32_t data_type);

/* read_file reads a whole file of at most `max` bytes into a malloc'ed buffer (*out, freed by
 * the caller) and returns 0, or -1 with a message. */
int read_file(const char* path, size_t max, uint8_t** out, size_t* len, char* err, size_t errlen);

/* tensor_proto_parse decodes one TensorProto: dims (1), data_type (2), float_data (4),
 * int32_data (5), int64_data (7), name (8), raw_data (9), double_data (10), uint64_data (11),
 * packed or not. Tensors with external data or string elements are refused. On success *out
 * owns its data. */
int tensor_proto_parse(const uint8_t* buf, size_t len, host_tensor* out, char* err, size_t errlen);

/* tensor_proto_read_file reads and parses a .pb file holding one TensorProto. */
int tensor_proto_read_file(const char* path, host_tensor* out, char* err, size_t errlen);

/* host_tensor_alloc makes a zeroed tensor of the given type and shape. */
int host_tensor_alloc(host_tensor* t, int32_t data_type, const int64_t* dims, size_t ndims, char* err, size_t errlen);

/* host_tensor_free releases the data and zeroes the struct (safe on a zeroed struct). */
void host_tensor_free(host_tensor* t);

/* model_value: a graph input or output, with its declared element type (ONNX_PB_*; 0 when it
 * is not a tensor or declares none) and shape. */
typedef struct model_value {
  char name[ONNX_PB_NAME];
  int32_t elem_type;
  int has_shape;                                /* the type declares a shape */
  size_t ndims;                                 /* its rank (the first ONNX_PB_MAX_DIMS dims kept) */
  int64_t dims[ONNX_PB_MAX_DIMS];               /* dim_value, or -1 for a symbolic or unknown dim */
} model_value;

/* model_value_find returns the value of `values` named `name`, NULL if none. */
const model_value* model_value_find(const model_value* values, size_t n, const char* name);

/* model_summary: what a ModelProto's main graph is made of. */
typedef struct model_summary {
  size_t num_nodes;
  size_t num_ops;                               /* distinct operator types, in first-use order */
  char ops[ONNX_PB_MAX_OPS][64];
  int64_t onnx_opset;                           /* opset of the "" / "ai.onnx" domain, 0 if absent */
  int all_float;                                /* every typed value is a float32 tensor */
  int custom_domain;                            /* a node outside the ONNX domain */
  int has_subgraph;                             /* a node with a graph attribute */
  char first_non_float[ONNX_PB_NAME + 64];      /* why all_float is 0 */
  size_t num_inputs, num_outputs;               /* the graph's inputs and outputs, in order (the
                                                   first ONNX_PB_MAX_IO of each) */
  model_value inputs[ONNX_PB_MAX_IO], outputs[ONNX_PB_MAX_IO];
} model_summary;

/* model_summarize scans a ModelProto's graph: nodes (op_type, domain, graph attributes),
 * initializers' data types and the element types of inputs, outputs and value_info (a non-tensor
 * type or a tensor of another type clears all_float), and the graph's declared inputs and
 * outputs. */
int model_summarize(const uint8_t* buf, size_t len, model_summary* out, char* err, size_t errlen);

#endif /* CUDAEP_CTESTS_ORT_ONNX_PB_H */
