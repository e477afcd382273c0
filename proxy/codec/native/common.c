/* Helpers every file here uses: errors, integers, the varints and tagged fields of header.py. */

#include "accel.h"
#include "structmember.h"

#include <string.h>

PyObject *protocol_error(PyObject *message) {
    if (message != NULL) {
        PyErr_SetObject(ProtocolError, message);
        Py_DECREF(message);
    }
    return NULL;
}

PyObject *incomplete(void) {
    PyErr_SetNone(Incomplete);
    return NULL;
}

/* A Python int as a long long; past its range, the nearest bound (every comparison here then comes out as the
 * Python one of the unbounded int would). */
int clamp_ll(PyObject *value, long long *out) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = overflow > 0 ? LLONG_MAX / 4 : overflow < 0 ? LLONG_MIN / 4 : v;
    return 0;
}

/* apis.is_flexible: FLEXIBLE_SINCE[key] <= version, read from the live table. -1 on error. */
int is_flexible(PyObject *key, long long version) {
    PyObject *since = PyDict_GetItemWithError(FlexibleSince, key);
    if (since == NULL) return PyErr_Occurred() ? -1 : 0;
    if (since == Py_None) return 0;
    long long s;
    if (clamp_ll(since, &s) < 0) return -1;
    return version >= s;
}

int is_flexible_ll(long long key, long long version) {
    PyObject *k = PyLong_FromLongLong(key);
    if (k == NULL) return -1;
    int flexible = is_flexible(k, version);
    Py_DECREF(k);
    return flexible;
}

/* header.read_uvarint: at most 5 bytes, Incomplete at ``end``. 0 ok, -1 error set. */
int header_uvarint(const unsigned char *b, int64_t end, int64_t *pos, int64_t *value) {
    int64_t v = 0;
    int shift = 0;
    int64_t p = *pos;
    for (;;) {
        if (p >= end) {
            incomplete();
            return -1;
        }
        unsigned char c = b[p++];
        v |= (int64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) {
            *pos = p;
            *value = v;
            return 0;
        }
        shift += 7;
        if (shift > 28) {
            PyErr_SetString(ProtocolError, "varint longer than 5 bytes");
            return -1;
        }
    }
}

/* header.skip_tagged_fields(buf[:len], pos, limit), the limit only when ``limited``: 0, -1 with the error set, or
 * -2 for HeaderTooLarge(*at_least), which no caller lets out. */
int skip_tagged(const unsigned char *b, int64_t len, int64_t *pos, int limited, int64_t limit,
                       int64_t *at_least) {
    int64_t count, p = *pos;
    if (header_uvarint(b, len, &p, &count) < 0) return -1;
    if (limited && p + 2 * count > limit) {
        *at_least = p + 2 * count;
        return -2;
    }
    int64_t end = limited && limit < len ? limit : len;
    while (count) {
        if (p + 1 < end && !((b[p] | b[p + 1]) & 0x80)) {
            p += 2 + b[p + 1];
        } else {
            int64_t tag, size;
            if (header_uvarint(b, len, &p, &tag) < 0 || header_uvarint(b, len, &p, &size) < 0) return -1;
            p += size;
        }
        count--;
        if (limited && p > limit) {
            *at_least = p;
            return -2;
        }
    }
    if (p > len) {
        incomplete();
        return -1;
    }
    *pos = p;
    return 0;
}

/* Arguments by position or keyword into out[] (NULL where not given), as a def of ``names`` takes them; -1 with a
 * TypeError. */
int arguments(const char *const *names, Py_ssize_t required, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames, PyObject **out) {
    Py_ssize_t count = 0;
    while (names[count] != NULL) count++;
    if (nargs > count) {
        PyErr_Format(PyExc_TypeError, "takes at most %zd arguments (%zd given)", count, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) out[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t keywords = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < keywords; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t i = 0;
        while (i < count && PyUnicode_CompareWithASCIIString(name, names[i]) != 0) i++;
        if (i == count || out[i] != NULL) {
            PyErr_Format(PyExc_TypeError, "unexpected or repeated argument %R", name);
            return -1;
        }
        out[i] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < required; i++)
        if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "missing argument %s", names[i]);
            return -1;
        }
    return 0;
}

/* Where a frozen dataclass with __slots__ keeps each of ``names``, so that new_slotted makes an instance as its
 * generated __init__ does (every field set in order, nothing else) without the Python call that sets them one by
 * one. 0 when it can: a class of exactly these object slots, no __post_init__, the object's __new__; 1 when not
 * (its callers then call the class); -1 with an error. */
int slots_of(PyObject *cls, const char *const *names, Slots *out) {
    out->type = NULL;
    if (!PyType_Check(cls) || ((PyTypeObject *)cls)->tp_new != PyBaseObject_Type.tp_new) return 1;
    if (PyObject_HasAttrString(cls, "__post_init__")) return 1;
    PyObject *slots = PyObject_GetAttrString(cls, "__slots__");
    if (slots == NULL) return PyErr_ExceptionMatches(PyExc_AttributeError) ? (PyErr_Clear(), 1) : -1;
    Py_ssize_t count = 0;
    while (names[count] != NULL) count++;
    int usable = PyTuple_Check(slots) && PyTuple_GET_SIZE(slots) == count && count <= MAX_SLOTS;
    for (Py_ssize_t i = 0; usable && i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(slots, i);
        usable = PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, names[i]) == 0;
        PyObject *descr = usable ? PyObject_GetAttr(cls, name) : NULL;
        if (descr == NULL) {
            Py_DECREF(slots);
            return usable ? -1 : 1;
        }
        usable = Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX;
        if (usable) out->offsets[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
        Py_DECREF(descr);
    }
    Py_DECREF(slots);
    if (!usable) return 1;
    out->type = (PyTypeObject *)cls;
    out->count = count;
    return 0;
}

/* An instance of ``cls`` with ``values`` (borrowed, one per slot, in order): made directly when slots_of could, else
 * by calling the class with them. */
PyObject *new_slotted(PyObject *cls, const Slots *slots, PyObject *const *values, Py_ssize_t count) {
    if (slots->type != (PyTypeObject *)cls || slots->count != count) return PyObject_Vectorcall(cls, values, count, NULL);
    PyObject *instance = slots->type->tp_alloc(slots->type, 0);
    if (instance == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) *(PyObject **)((char *)instance + slots->offsets[i]) = Py_NewRef(values[i]);
    return instance;
}

/* Texts decoded lately: the str last decoded from the same bytes when an ASCII one of them sits in its slot of
 * ``slots`` (a slot per hash of the bytes; at most RECENT_TEXT_MAX bytes), else the bytes decoded (UTF-8; NULL with
 * the decoder's error). A client sends one client id on every request, a producer mostly one topic: most requests
 * skip the decoding, and the lookups keyed by the text (the quotas' tables) skip hashing a new str. A slot holds an
 * immutable str the next text of its hash replaces: a tenant's many ids fill nothing. */
PyObject *recent_text(PyObject **slots, const unsigned char *b, Py_ssize_t n) {
    if (n > RECENT_TEXT_MAX) return PyUnicode_DecodeUTF8((const char *)b, n, NULL);
    uint32_t hash = (uint32_t)n;
    for (Py_ssize_t i = 0; i < n; i++) hash = hash * 31 + b[i];
    PyObject **slot = &slots[(hash ^ hash >> 16) % RECENT_TEXTS], *kept = *slot;
    if (kept != NULL && PyUnicode_GET_LENGTH(kept) == n && memcmp(PyUnicode_DATA(kept), b, (size_t)n) == 0)
        return Py_NewRef(kept); /* ASCII (nothing else is kept): its characters are its bytes */
    PyObject *decoded = PyUnicode_DecodeUTF8((const char *)b, n, NULL);
    if (decoded != NULL && PyUnicode_IS_ASCII(decoded)) Py_XSETREF(*slot, Py_NewRef(decoded));
    return decoded;
}
