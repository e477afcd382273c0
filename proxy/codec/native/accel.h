/* The codec's hot path in C (proxy/codec/accel.py chooses it or the pure Python): what the files of this folder
 * share. Each .c holds the C of one Python module, beside the pure function it mirrors by name: the same results
 * and the same errors (class and message) for the same bytes (tests/proxy/codec/test_accel_differential.py).
 *
 * Built by setup.py as one extension, proxy.codec._accel, with -fvisibility=hidden: nothing but its PyInit is
 * exported, so the names shared between these files stay inside it. Bytes in, values out: no I/O, no state but
 * what the configure_* functions hand over once at import. */

#ifndef ACCEL_H
#define ACCEL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* What the Python side hands over at import (module.c's configure_*). */
extern PyObject *ProtocolError, *Incomplete, *RequestHeader, *ResponseHeader, *FlexibleSince;
extern PyObject *WalkFrame;                   /* produce_prefix._walk_frame(buf, size, topics_at, version) */
extern PyObject *SkimProgram, *PrefixProgram; /* skim: (program bytes, flexible) of (api, direction, version[, name]) */
extern PyObject *SkimPlans, *PrefixPlans;     /* the programs made so far, by their key */
extern PyObject *DefaultLimitName;            /* "socket.request.max.bytes" */

#define PRODUCE 0
#define FETCH 1
#define API_VERSIONS 18
#define FETCH_REPLICA_STATE_SINCE 15
#define DEFAULT_MAX_HEADER 65536

/* Every entry point first: an unconfigured module (imported directly, not through accel.py) raises, never crashes. */
#define CONFIGURED(what)                                                                                           \
    if ((what) == NULL) {                                                                                          \
        PyErr_SetString(PyExc_RuntimeError, "proxy.codec._accel is used through proxy.codec.accel");               \
        return NULL;                                                                                               \
    }

static inline int16_t be16(const unsigned char *p) { return (int16_t)((p[0] << 8) | p[1]); }
static inline int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}
static inline int64_t be64(const unsigned char *p) { return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint32_t)be32(p + 4)); }

#define PE_FORMAT(...) protocol_error(PyUnicode_FromFormat(__VA_ARGS__))

/* common.c */
PyObject *protocol_error(PyObject *message);
PyObject *incomplete(void);
int clamp_ll(PyObject *value, long long *out);
int is_flexible(PyObject *key, long long version);
int is_flexible_ll(long long key, long long version);
#define RECENT_TEXTS 64     /* slots of a recent_text table */
#define RECENT_TEXT_MAX 64  /* the longest text kept */
PyObject *recent_text(PyObject **slots, const unsigned char *b, Py_ssize_t n);
int header_uvarint(const unsigned char *b, int64_t end, int64_t *pos, int64_t *value);
int skip_tagged(const unsigned char *b, int64_t len, int64_t *pos, int limited, int64_t limit, int64_t *at_least);
#define MAX_SLOTS 16
typedef struct {
    PyTypeObject *type; /* NULL: made by calling the class */
    Py_ssize_t count;
    Py_ssize_t offsets[MAX_SLOTS];
} Slots;
extern Slots RequestSlots, ResponseSlots; /* RequestHeader's and ResponseHeader's (module.c) */
int slots_of(PyObject *cls, const char *const *names, Slots *out);
PyObject *new_slotted(PyObject *cls, const Slots *slots, PyObject *const *values, Py_ssize_t count);
int arguments(const char *const *names, Py_ssize_t required, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames, PyObject **out);

/* header.c: the request header as produce.c reads on from it */
typedef struct {
    Py_buffer view;
    const unsigned char *b;
    int64_t len;
    int32_t size;
    int16_t api_key, api_version;
    int32_t correlation_id;
    PyObject *client_id; /* a new reference */
    int64_t header_length;
} Header;
int get_buffer(PyObject *buf, Header *h);
int read_request_header(Header *h, PyObject *max_size_obj, PyObject *limit_name, PyObject *max_header_obj);

/* splitter.c: the type proxy.codec._accel.FrameSplitter, added to the module at its init */
int add_splitter(PyObject *module);
PyObject *configure_splitter(PyObject *self, PyObject *args);

/* The entry points (module.c's method table) */
PyObject *request_header_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *parse_response_prefix(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *response_header_length(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *parse_request_prefix(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *tagged_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *array_count(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

#endif
