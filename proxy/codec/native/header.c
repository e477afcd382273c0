/* header.py in C: request_header_fields (with frame_size), parse_response_prefix, response_header_length. */

#include <string.h>

#include "accel.h"

static PyObject *ClientIds[RECENT_TEXTS]; /* the client ids decoded lately (recent_text) */

static PyObject *limit_text(PyObject *limit_name) { return limit_name ? limit_name : DefaultLimitName; }

/* header.frame_size and request_header_fields on h->b; 0 ok (h->client_id set), -1 with the error set. */
int read_request_header(Header *h, PyObject *max_size_obj, PyObject *limit_name, PyObject *max_header_obj) {
    const unsigned char *b = h->b;
    int64_t len = h->len;
    long long max_size, max_header = DEFAULT_MAX_HEADER;
    if (clamp_ll(max_size_obj, &max_size) < 0) return -1;
    if (max_header_obj != NULL && clamp_ll(max_header_obj, &max_header) < 0) return -1;
    if (len < 4) return incomplete(), -1;
    int32_t size = be32(b);
    if (size < 0) return PE_FORMAT("negative frame size %d", size), -1;
    if (size > max_size) {
        if (b[0] == 0x16 && b[1] == 0x03 && b[2] <= 0x04) {
            PyErr_SetString(ProtocolError,
                            "a TLS handshake arrived on a plaintext listener (a client configured for SSL? "
                            "give this listener a tls section, or the client the plaintext address)");
            return -1;
        }
        return PE_FORMAT("frame size %d exceeds %S %S", size, limit_text(limit_name), max_size_obj), -1;
    }
    if (size < 10) return PE_FORMAT("request frame of %d bytes is shorter than a request header", size), -1;
    if (len < 14) return incomplete(), -1;
    h->size = size;
    h->api_key = be16(b + 4);
    h->api_version = be16(b + 6);
    h->correlation_id = be32(b + 8);
    int16_t client_id_len = be16(b + 12);
    int64_t pos = 14;
    int64_t frame_end = (int64_t)size + 4;
    PyObject *max_header_text = max_header_obj;
    if (client_id_len >= 0) {
        int64_t end = pos + client_id_len;
        if (end > max_header + 4) {
            if (max_header_text == NULL) max_header_text = PyLong_FromLong(DEFAULT_MAX_HEADER);
            else Py_INCREF(max_header_text);
            if (max_header_text == NULL) return -1;
            PE_FORMAT("request header over request.header.max.bytes %S: a client_id of %d bytes", max_header_text,
                      client_id_len);
            Py_DECREF(max_header_text);
            return -1;
        }
        if (end > frame_end)
            return PE_FORMAT("client_id of %d bytes runs past the %d-byte frame", client_id_len, size), -1;
        if (end > len) return incomplete(), -1;
        PyObject *client_id = recent_text(ClientIds, b + pos, client_id_len);
        if (client_id == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return -1;
            PyObject *type, *value, *traceback;
            PyErr_Fetch(&type, &value, &traceback);
            PyErr_NormalizeException(&type, &value, &traceback);
            PE_FORMAT("client_id is not UTF-8: %S", value);
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(traceback);
            return -1;
        }
        h->client_id = client_id;
        pos = end;
    } else if (client_id_len != -1) {
        return PE_FORMAT("invalid client_id length %d", client_id_len), -1;
    } else {
        h->client_id = Py_NewRef(Py_None);
    }
    if (h->api_version < 0) {
        Py_CLEAR(h->client_id);
        return PE_FORMAT("negative api_version %d", h->api_version), -1;
    }
    int flexible = is_flexible_ll(h->api_key, h->api_version);
    if (flexible < 0) {
        Py_CLEAR(h->client_id);
        return -1;
    }
    if (flexible) { /* request header v2 (ControlledShutdown v0, header v0, is never flexible) */
        if (pos < frame_end && pos < len && !b[pos] && pos < max_header + 4) {
            pos += 1;
        } else {
            int64_t at_least = 0;
            int64_t within = len < frame_end ? len : frame_end;
            int found = skip_tagged(b, within, &pos, 1, max_header + 4, &at_least);
            if (found == -2) {
                if (max_header_text == NULL) max_header_text = PyLong_FromLong(DEFAULT_MAX_HEADER);
                else Py_INCREF(max_header_text);
                if (max_header_text != NULL) {
                    PE_FORMAT("request header over request.header.max.bytes %S: its tagged fields make it %lld "
                              "bytes at least",
                              max_header_text, (long long)(at_least - 4));
                    Py_DECREF(max_header_text);
                }
            }
            if (found < 0) {
                Py_CLEAR(h->client_id);
                return -1;
            }
        }
    }
    if (pos > frame_end) {
        Py_CLEAR(h->client_id);
        PyErr_SetString(ProtocolError, "request header runs past the end of its frame");
        return -1;
    }
    h->header_length = pos;
    return 0;
}

int get_buffer(PyObject *buf, Header *h) {
    if (PyObject_GetBuffer(buf, &h->view, PyBUF_SIMPLE) < 0) return -1;
    h->b = (const unsigned char *)h->view.buf;
    h->len = h->view.len;
    h->client_id = NULL;
    return 0;
}

static PyObject *header_tuple(Header *h) {
    return Py_BuildValue("(iiiiNL)", h->size, h->api_key, h->api_version, h->correlation_id, h->client_id,
                         (long long)h->header_length);
}

PyObject *request_header_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    CONFIGURED(FlexibleSince);
    static const char *const names[] = {"buf", "max_size", "limit_name", "max_header", NULL};
    PyObject *given[4];
    if (arguments(names, 2, args, nargs, kwnames, given) < 0) return NULL;
    PyObject *buf = given[0], *max_size = given[1], *limit_name = given[2], *max_header = given[3];
    Header h;
    if (get_buffer(buf, &h) < 0) return NULL;
    PyObject *result = NULL;
    if (read_request_header(&h, max_size, limit_name, max_header) == 0) result = header_tuple(&h);
    PyBuffer_Release(&h.view);
    return result;
}

PyObject *parse_response_prefix(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    CONFIGURED(ResponseHeader);
    static const char *const names[] = {"buf", "max_size", NULL};
    PyObject *given[2];
    if (arguments(names, 1, args, nargs, kwnames, given) < 0) return NULL;
    PyObject *buf = given[0], *max_size_obj = given[1];
    long long max_size = 2147483647LL;
    if (max_size_obj != NULL && clamp_ll(max_size_obj, &max_size) < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = view.buf;
    PyObject *result = NULL;
    if (view.len < 4) {
        incomplete();
        goto out;
    }
    int32_t size = be32(b);
    if (size < 4) {
        PE_FORMAT("response frame of %d bytes is shorter than a response header", size);
        goto out;
    }
    if (size > max_size) {
        PyObject *text = max_size_obj ? Py_NewRef(max_size_obj) : PyLong_FromLongLong(max_size);
        if (text != NULL) {
            PE_FORMAT("response frame size %d exceeds upstream.response.max.bytes %S", size, text);
            Py_DECREF(text);
        }
        goto out;
    }
    if (view.len < 8) {
        incomplete();
        goto out;
    }
    PyObject *fields[3] = {PyLong_FromLong(size), PyLong_FromLong(be32(b + 4)), Py_False};
    if (fields[0] != NULL && fields[1] != NULL) result = new_slotted(ResponseHeader, &ResponseSlots, fields, 3);
    Py_XDECREF(fields[0]);
    Py_XDECREF(fields[1]);
out:
    PyBuffer_Release(&view);
    return result;
}

PyObject *response_header_length(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    CONFIGURED(FlexibleSince);
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "response_header_length takes 3 arguments");
        return NULL;
    }
    long long key, version;
    if (clamp_ll(args[0], &key) < 0 || clamp_ll(args[1], &version) < 0) return NULL;
    int flexible = key == API_VERSIONS ? 0 : is_flexible(args[0], version);
    if (flexible < 0) return NULL;
    if (!flexible) return PyLong_FromLong(8);
    Py_buffer view;
    if (PyObject_GetBuffer(args[2], &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = view.buf;
    PyObject *result = NULL;
    if (view.len > 8 && !b[8]) {
        result = PyLong_FromLong(9);
    } else {
        int64_t pos = 8, at_least;
        if (skip_tagged(b, view.len, &pos, 0, 0, &at_least) == 0) {
            result = PyLong_FromLongLong(pos);
        } else if (PyErr_ExceptionMatches(Incomplete)) {
            PyErr_Clear();
            PyErr_SetString(ProtocolError, "response header tagged fields run past the frame");
        }
    }
    PyBuffer_Release(&view);
    return result;
}
