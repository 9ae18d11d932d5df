/*
 * onnx_pb.c - the bounded protobuf wire reader behind onnx_pb.h (see there for the contract).
 */
#include "onnx_pb.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- errors ---------------------------------------------------------------------------------- */

static int fail(char* err, size_t errlen, const char* fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* --- wire format ----------------------------------------------------------------------------- */

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

typedef struct pb {
  const uint8_t* p;
  const uint8_t* end;
} pb;

/* pb_varint reads one varint (at most 10 bytes). */
static int pb_varint(pb* r, uint64_t* v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (r->p >= r->end) return -1;
    uint8_t b = *r->p++;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return -1;
}

/* pb_field: one field of a message. For WIRE_VARINT `v` is the value; for the others `data` and
 * `len` are the bytes (8 for WIRE_I64, 4 for WIRE_I32, the payload for WIRE_LEN). */
typedef struct pb_field {
  uint32_t number;
  int wire;
  uint64_t v;
  const uint8_t* data;
  size_t len;
} pb_field;

/* pb_next reads the next field: 1 = a field, 0 = end of message, -1 = malformed. */
static int pb_next(pb* r, pb_field* f) {
  if (r->p == r->end) return 0;
  uint64_t key;
  if (pb_varint(r, &key) < 0) return -1;
  if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff) return -1;
  f->number = (uint32_t)(key >> 3);
  f->wire = (int)(key & 7);
  f->v = 0;
  f->data = NULL;
  f->len = 0;
  size_t left = (size_t)(r->end - r->p);
  switch (f->wire) {
    case WIRE_VARINT:
      return pb_varint(r, &f->v) < 0 ? -1 : 1;
    case WIRE_I64:
      if (left < 8) return -1;
      f->data = r->p;
      f->len = 8;
      r->p += 8;
      return 1;
    case WIRE_I32:
      if (left < 4) return -1;
      f->data = r->p;
      f->len = 4;
      r->p += 4;
      return 1;
    case WIRE_LEN: {
      uint64_t n;
      if (pb_varint(r, &n) < 0) return -1;
      if (n > (uint64_t)(r->end - r->p)) return -1;
      f->data = r->p;
      f->len = (size_t)n;
      r->p += n;
      return 1;
    }
    default:
      return -1; /* groups (3, 4) and reserved wire types are not used by ONNX */
  }
}

static pb pb_sub(const pb_field* f) {
  pb r = {f->data, f->data + f->len};
  return r;
}

static void copy_name(char* dst, size_t cap, const uint8_t* s, size_t n) {
  if (n >= cap) n = cap - 1;
  memcpy(dst, s, n);
  dst[n] = 0;
  for (size_t i = 0; i < n; i++)
    if (dst[i] == 0 || (unsigned char)dst[i] < 0x20) dst[i] = '?';
}

static uint32_t le32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t* p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* --- types ----------------------------------------------------------------------------------- */

size_t onnx_pb_elem_size(int32_t t) {
  switch (t) {
    case ONNX_PB_UINT8:
    case ONNX_PB_INT8:
    case ONNX_PB_BOOL:
      return 1;
    case ONNX_PB_UINT16:
    case ONNX_PB_INT16:
    case ONNX_PB_FLOAT16:
    case ONNX_PB_BFLOAT16:
      return 2;
    case ONNX_PB_FLOAT:
    case ONNX_PB_INT32:
    case ONNX_PB_UINT32:
      return 4;
    case ONNX_PB_INT64:
    case ONNX_PB_DOUBLE:
    case ONNX_PB_UINT64:
      return 8;
    default:
      return 0;
  }
}

const char* onnx_pb_type_name(int32_t t) {
  switch (t) {
    case ONNX_PB_FLOAT: return "float";
    case ONNX_PB_UINT8: return "uint8";
    case ONNX_PB_INT8: return "int8";
    case ONNX_PB_UINT16: return "uint16";
    case ONNX_PB_INT16: return "int16";
    case ONNX_PB_INT32: return "int32";
    case ONNX_PB_INT64: return "int64";
    case ONNX_PB_STRING: return "string";
    case ONNX_PB_BOOL: return "bool";
    case ONNX_PB_FLOAT16: return "float16";
    case ONNX_PB_DOUBLE: return "double";
    case ONNX_PB_UINT32: return "uint32";
    case ONNX_PB_UINT64: return "uint64";
    case ONNX_PB_BFLOAT16: return "bfloat16";
    default: return "other";
  }
}

/* --- files ----------------------------------------------------------------------------------- */

int read_file(const char* path, size_t max, uint8_t** out, size_t* len, char* err, size_t errlen) {
  *out = NULL;
  *len = 0;
  FILE* f = fopen(path, "rb");
  if (!f) return fail(err, errlen, "open %s: %s", path, strerror(errno));
  if (fseek(f, 0, SEEK_END) != 0) {
    fclose(f);
    return fail(err, errlen, "seek %s: %s", path, strerror(errno));
  }
  long size = ftell(f);
  if (size < 0 || (unsigned long)size > max) {
    fclose(f);
    return fail(err, errlen, "%s: size %ld is over the limit of %zu bytes", path, size, max);
  }
  rewind(f);
  uint8_t* buf = malloc((size_t)size + 1); /* +1: never malloc(0) */
  if (!buf) {
    fclose(f);
    return fail(err, errlen, "%s: out of memory for %ld bytes", path, size);
  }
  size_t got = fread(buf, 1, (size_t)size, f);
  int read_error = ferror(f);
  fclose(f);
  if (got != (size_t)size || read_error) {
    free(buf);
    return fail(err, errlen, "%s: read %zu of %ld bytes", path, got, size);
  }
  *out = buf;
  *len = (size_t)size;
  return 0;
}

/* --- tensors --------------------------------------------------------------------------------- */

void host_tensor_free(host_tensor* t) {
  if (!t) return;
  free(t->data);
  memset(t, 0, sizeof *t);
}

static int count_elements(const int64_t* dims, size_t ndims, size_t* count, char* err, size_t errlen) {
  size_t n = 1;
  for (size_t i = 0; i < ndims; i++) {
    if (dims[i] < 0) return fail(err, errlen, "negative dimension %lld", (long long)dims[i]);
    if (dims[i] != 0 && n > ONNX_PB_MAX_ELEMENTS / (size_t)dims[i])
      return fail(err, errlen, "tensor larger than %zu elements", (size_t)ONNX_PB_MAX_ELEMENTS);
    n *= (size_t)dims[i];
  }
  if (n > ONNX_PB_MAX_ELEMENTS) return fail(err, errlen, "tensor larger than %zu elements", (size_t)ONNX_PB_MAX_ELEMENTS);
  *count = n;
  return 0;
}

int host_tensor_alloc(host_tensor* t, int32_t data_type, const int64_t* dims, size_t ndims, char* err, size_t errlen) {
  memset(t, 0, sizeof *t);
  size_t es = onnx_pb_elem_size(data_type);
  if (es == 0) return fail(err, errlen, "unsupported element type %d (%s)", data_type, onnx_pb_type_name(data_type));
  if (ndims > ONNX_PB_MAX_DIMS) return fail(err, errlen, "%zu dimensions (limit %d)", ndims, ONNX_PB_MAX_DIMS);
  size_t count = 0;
  if (count_elements(dims, ndims, &count, err, errlen) < 0) return -1;
  t->data = calloc(count ? count : 1, es);
  if (!t->data) return fail(err, errlen, "out of memory for %zu elements", count);
  t->data_type = data_type;
  t->ndims = ndims;
  if (ndims) memcpy(t->dims, dims, ndims * sizeof dims[0]);
  t->count = count;
  t->elem_size = es;
  return 0;
}

/* store_int writes integer-coded value v as element i of t (int32_data / int64_data / uint64_data
 * carry every integer type, bool, float16 and bfloat16 bit patterns). */
static void store_int(host_tensor* t, size_t i, uint64_t v) {
  uint8_t* d = (uint8_t*)t->data + i * t->elem_size;
  switch (t->elem_size) {
    case 1: { uint8_t x = (uint8_t)v; memcpy(d, &x, 1); break; }
    case 2: { uint16_t x = (uint16_t)v; memcpy(d, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(d, &x, 4); break; }
    default: memcpy(d, &v, 8); break;
  }
}

/* Which repeated field carries the values of a data type when raw_data is absent. */
static uint32_t typed_field(int32_t t) {
  switch (t) {
    case ONNX_PB_FLOAT: return 4;
    case ONNX_PB_INT64: return 7;
    case ONNX_PB_DOUBLE: return 10;
    case ONNX_PB_UINT32:
    case ONNX_PB_UINT64: return 11;
    default: return 5; /* int32_data: int32, int16, int8, uint16, uint8, bool, float16, bfloat16 */
  }
}

/* for_each_value walks the values of repeated field `number` (packed or not) and, when `t` is not
 * NULL, stores them into t. Returns the number of values, or -1 if malformed or more than `cap`. */
static long for_each_value(const uint8_t* buf, size_t len, uint32_t number, host_tensor* t, size_t cap) {
  pb r = {buf, buf + len};
  pb_field f;
  int rc;
  size_t n = 0;
  const int fixed32 = number == 4, fixed64 = number == 10;
  while ((rc = pb_next(&r, &f)) == 1) {
    if (f.number != number) continue;
    if (f.wire == WIRE_LEN) { /* packed */
      pb q = pb_sub(&f);
      while (q.p < q.end) {
        uint64_t v;
        if (fixed32) {
          if (q.end - q.p < 4) return -1;
          v = le32(q.p);
          q.p += 4;
        } else if (fixed64) {
          if (q.end - q.p < 8) return -1;
          v = le64(q.p);
          q.p += 8;
        } else if (pb_varint(&q, &v) < 0) {
          return -1;
        }
        if (n >= cap) return -1;
        if (t) store_int(t, n, v);
        n++;
      }
    } else {
      uint64_t v;
      if (fixed32 && f.wire == WIRE_I32) v = le32(f.data);
      else if (fixed64 && f.wire == WIRE_I64) v = le64(f.data);
      else if (!fixed32 && !fixed64 && f.wire == WIRE_VARINT) v = f.v;
      else return -1;
      if (n >= cap) return -1;
      if (t) store_int(t, n, v);
      n++;
    }
  }
  return rc < 0 ? -1 : (long)n;
}

int tensor_proto_parse(const uint8_t* buf, size_t len, host_tensor* out, char* err, size_t errlen) {
  memset(out, 0, sizeof *out);
  pb r = {buf, buf + len};
  pb_field f;
  int rc;
  int64_t dims[ONNX_PB_MAX_DIMS];
  size_t ndims = 0;
  int32_t data_type = 0;
  char name[ONNX_PB_NAME] = "";
  const uint8_t* raw = NULL;
  size_t raw_len = 0;
  int have_raw = 0;
  while ((rc = pb_next(&r, &f)) == 1) {
    switch (f.number) {
      case 1: /* dims */
        if (f.wire == WIRE_VARINT) {
          if (ndims >= ONNX_PB_MAX_DIMS) return fail(err, errlen, "more than %d dims", ONNX_PB_MAX_DIMS);
          dims[ndims++] = (int64_t)f.v;
        } else if (f.wire == WIRE_LEN) {
          pb q = pb_sub(&f);
          while (q.p < q.end) {
            uint64_t v;
            if (pb_varint(&q, &v) < 0) return fail(err, errlen, "malformed packed dims");
            if (ndims >= ONNX_PB_MAX_DIMS) return fail(err, errlen, "more than %d dims", ONNX_PB_MAX_DIMS);
            dims[ndims++] = (int64_t)v;
          }
        } else {
          return fail(err, errlen, "dims has wire type %d", f.wire);
        }
        break;
      case 2:
        if (f.wire != WIRE_VARINT) return fail(err, errlen, "data_type has wire type %d", f.wire);
        data_type = (int32_t)f.v;
        break;
      case 3:
        return fail(err, errlen, "segmented tensors are not supported");
      case 6:
        return fail(err, errlen, "string tensors are not supported");
      case 8:
        if (f.wire != WIRE_LEN) return fail(err, errlen, "name has wire type %d", f.wire);
        copy_name(name, sizeof name, f.data, f.len);
        break;
      case 9:
        if (f.wire != WIRE_LEN) return fail(err, errlen, "raw_data has wire type %d", f.wire);
        raw = f.data;
        raw_len = f.len;
        have_raw = 1;
        break;
      case 13:
        return fail(err, errlen, "tensors with external data are not supported here");
      case 14:
        if (f.wire == WIRE_VARINT && f.v != 0) return fail(err, errlen, "data_location %llu is not DEFAULT",
                                                           (unsigned long long)f.v);
        break;
      default:
        break; /* typed data fields are read below; doc_string etc. ignored */
    }
  }
  if (rc < 0) return fail(err, errlen, "malformed TensorProto");
  /* Check that the payload matches the shape before allocating: a small file must not make the
   * host allocate what its dims claim. */
  size_t es = onnx_pb_elem_size(data_type);
  if (es == 0) return fail(err, errlen, "unsupported element type %d (%s)", data_type, onnx_pb_type_name(data_type));
  if (ndims > ONNX_PB_MAX_DIMS) return fail(err, errlen, "%zu dimensions (limit %d)", ndims, ONNX_PB_MAX_DIMS);
  size_t count = 0;
  if (count_elements(dims, ndims, &count, err, errlen) < 0) return -1;
  uint32_t field = typed_field(data_type);
  if (have_raw) {
    if (raw_len != count * es)
      return fail(err, errlen, "raw_data has %zu bytes, shape and type need %zu", raw_len, count * es);
  } else {
    long n = for_each_value(buf, len, field, NULL, count);
    if (n < 0) return fail(err, errlen, "field %u is malformed or holds more than %zu values", field, count);
    if ((size_t)n != count) return fail(err, errlen, "field %u holds %ld values, shape needs %zu", field, n, count);
  }
  if (host_tensor_alloc(out, data_type, dims, ndims, err, errlen) < 0) return -1;
  memcpy(out->name, name, sizeof name);
  if (have_raw) {
    if (raw_len) memcpy(out->data, raw, raw_len);
  } else if (for_each_value(buf, len, field, out, count) != (long)count) {
    host_tensor_free(out);
    return fail(err, errlen, "field %u changed between two reads", field);
  }
  return 0;
}

int tensor_proto_read_file(const char* path, host_tensor* out, char* err, size_t errlen) {
  uint8_t* buf;
  size_t len;
  memset(out, 0, sizeof *out);
  if (read_file(path, ONNX_PB_MAX_FILE, &buf, &len, err, errlen) < 0) return -1;
  char inner[256];
  int rc = tensor_proto_parse(buf, len, out, inner, sizeof inner);
  free(buf);
  if (rc < 0) return fail(err, errlen, "%s: %s", path, inner);
  return 0;
}

/* --- models ---------------------------------------------------------------------------------- */

static void not_float(model_summary* s, const char* what, const uint8_t* name, size_t name_len, const char* why) {
  if (!s->all_float) return;
  s->all_float = 0;
  char n[ONNX_PB_NAME];
  copy_name(n, sizeof n, name ? name : (const uint8_t*)"", name ? name_len : 0);
  snprintf(s->first_non_float, sizeof s->first_non_float, "%s %s is %s", what, n, why);
}

const model_value* model_value_find(const model_value* values, size_t n, const char* name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(values[i].name, name)) return &values[i];
  return NULL;
}

/* read_shape: TensorShapeProto {1: dim Dimension {1: dim_value, 2: dim_param}} into v. */
static int read_shape(pb_field* shape, model_value* v) {
  pb r = pb_sub(shape);
  pb_field d;
  int rc;
  v->has_shape = 1;
  while ((rc = pb_next(&r, &d)) == 1) {
    if (d.number != 1 || d.wire != WIRE_LEN) continue;
    int64_t value = -1;
    pb dr = pb_sub(&d);
    pb_field e;
    int rc2;
    while ((rc2 = pb_next(&dr, &e)) == 1)
      if (e.number == 1 && e.wire == WIRE_VARINT) value = (int64_t)e.v;
    if (rc2 < 0) return -1;
    if (v->ndims < ONNX_PB_MAX_DIMS) v->dims[v->ndims] = value;
    v->ndims++;
  }
  return rc < 0 ? -1 : 0;
}

/* check_value_info: ValueInfoProto {1: name, 2: TypeProto {1: tensor_type {1: elem_type}}}; it
 * records the value in `keep` (when not NULL and *n has room). */
static int check_value_info(model_summary* s, const char* what, pb_field* vi, model_value* keep, size_t* n) {
  pb r = pb_sub(vi);
  pb_field f;
  int rc;
  const uint8_t* name = NULL;
  size_t name_len = 0;
  int have_type = 0;
  int64_t elem = -1;
  int non_tensor = 0;
  model_value v;
  memset(&v, 0, sizeof v);
  while ((rc = pb_next(&r, &f)) == 1) {
    if (f.number == 1 && f.wire == WIRE_LEN) {
      name = f.data;
      name_len = f.len;
    } else if (f.number == 2 && f.wire == WIRE_LEN) {
      have_type = 1;
      pb t = pb_sub(&f);
      pb_field g;
      int rc2;
      while ((rc2 = pb_next(&t, &g)) == 1) {
        if (g.number == 1 && g.wire == WIRE_LEN) {
          pb tt = pb_sub(&g);
          pb_field h;
          int rc3;
          while ((rc3 = pb_next(&tt, &h)) == 1) {
            if (h.number == 1 && h.wire == WIRE_VARINT) elem = (int64_t)h.v;
            else if (h.number == 2 && h.wire == WIRE_LEN && read_shape(&h, &v) < 0) return -1;
          }
          if (rc3 < 0) return -1;
        } else if (g.wire == WIRE_LEN && g.number != 6) { /* 6: denotation */
          non_tensor = 1;
        }
      }
      if (rc2 < 0) return -1;
    }
  }
  if (rc < 0) return -1;
  if (keep && *n < ONNX_PB_MAX_IO) {
    copy_name(v.name, sizeof v.name, name ? name : (const uint8_t*)"", name ? name_len : 0);
    v.elem_type = non_tensor || elem < 0 ? 0 : (int32_t)elem;
    if (non_tensor) v.has_shape = 0, v.ndims = 0;
    keep[(*n)++] = v;
  }
  if (non_tensor) not_float(s, what, name, name_len, "not a tensor");
  else if (have_type && elem != ONNX_PB_FLOAT) {
    char why[64];
    snprintf(why, sizeof why, "a %s tensor", onnx_pb_type_name((int32_t)elem));
    not_float(s, what, name, name_len, why);
  }
  return 0;
}

static int scan_node(model_summary* s, pb_field* nf) {
  pb r = pb_sub(nf);
  pb_field f;
  int rc;
  char op[64] = "";
  int custom = 0;
  while ((rc = pb_next(&r, &f)) == 1) {
    if (f.number == 4 && f.wire == WIRE_LEN) {
      copy_name(op, sizeof op, f.data, f.len);
    } else if (f.number == 7 && f.wire == WIRE_LEN) {
      if (!(f.len == 0 || (f.len == 7 && memcmp(f.data, "ai.onnx", 7) == 0))) custom = 1;
    } else if (f.number == 5 && f.wire == WIRE_LEN) { /* AttributeProto: 6 g, 11 graphs */
      pb a = pb_sub(&f);
      pb_field g;
      int rc2;
      while ((rc2 = pb_next(&a, &g)) == 1)
        if ((g.number == 6 || g.number == 11) && g.wire == WIRE_LEN) s->has_subgraph = 1;
      if (rc2 < 0) return -1;
    }
  }
  if (rc < 0) return -1;
  s->num_nodes++;
  if (custom) s->custom_domain = 1;
  for (size_t i = 0; i < s->num_ops; i++)
    if (strcmp(s->ops[i], op) == 0) return 0;
  if (s->num_ops < ONNX_PB_MAX_OPS) {
    memcpy(s->ops[s->num_ops], op, sizeof op);
    s->num_ops++;
  } else {
    s->custom_domain = 1; /* too many kinds of node to be a single-operator test */
  }
  return 0;
}

int model_summarize(const uint8_t* buf, size_t len, model_summary* s, char* err, size_t errlen) {
  memset(s, 0, sizeof *s);
  s->all_float = 1;
  pb r = {buf, buf + len};
  pb_field f;
  int rc;
  int have_graph = 0;
  while ((rc = pb_next(&r, &f)) == 1) {
    if (f.number == 8 && f.wire == WIRE_LEN) { /* opset_import {1: domain, 2: version} */
      pb o = pb_sub(&f);
      pb_field g;
      int rc2;
      int onnx_domain = 1;
      int64_t version = 0;
      while ((rc2 = pb_next(&o, &g)) == 1) {
        if (g.number == 1 && g.wire == WIRE_LEN)
          onnx_domain = g.len == 0 || (g.len == 7 && memcmp(g.data, "ai.onnx", 7) == 0);
        else if (g.number == 2 && g.wire == WIRE_VARINT)
          version = (int64_t)g.v;
      }
      if (rc2 < 0) return fail(err, errlen, "malformed opset_import");
      if (onnx_domain) s->onnx_opset = version;
    } else if (f.number == 7 && f.wire == WIRE_LEN) {
      have_graph = 1;
      pb gr = pb_sub(&f);
      pb_field g;
      int rc2;
      while ((rc2 = pb_next(&gr, &g)) == 1) {
        if (g.wire != WIRE_LEN) continue;
        int bad = 0;
        switch (g.number) {
          case 1: bad = scan_node(s, &g); break;
          case 5: { /* initializer: TensorProto {2: data_type, 8: name} */
            pb t = pb_sub(&g);
            pb_field h;
            int rc3;
            int64_t dt = 0;
            const uint8_t* nm = NULL;
            size_t nl = 0;
            while ((rc3 = pb_next(&t, &h)) == 1) {
              if (h.number == 2 && h.wire == WIRE_VARINT) dt = (int64_t)h.v;
              if (h.number == 8 && h.wire == WIRE_LEN) { nm = h.data; nl = h.len; }
            }
            if (rc3 < 0) bad = -1;
            else if (dt != ONNX_PB_FLOAT) {
              char why[64];
              snprintf(why, sizeof why, "a %s tensor", onnx_pb_type_name((int32_t)dt));
              not_float(s, "initializer", nm, nl, why);
            }
            break;
          }
          case 11: bad = check_value_info(s, "input", &g, s->inputs, &s->num_inputs); break;
          case 12: bad = check_value_info(s, "output", &g, s->outputs, &s->num_outputs); break;
          case 13: bad = check_value_info(s, "value", &g, NULL, NULL); break;
          case 15: not_float(s, "sparse initializer", NULL, 0, "sparse"); break;
          default: break;
        }
        if (bad < 0) return fail(err, errlen, "malformed graph");
      }
      if (rc2 < 0) return fail(err, errlen, "malformed graph");
    }
  }
  if (rc < 0) return fail(err, errlen, "malformed ModelProto");
  if (!have_graph) return fail(err, errlen, "ModelProto has no graph");
  return 0;
}
