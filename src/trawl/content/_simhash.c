/* The 64-bit SimHash of trawl.content.simhash, and of a text's word shingles, in C.
 *
 * The same values as the Python references (trawl.content.simhash.reference_simhash,
 * and trawl.content.text's ``_features`` fed to it), which a build without compiling
 * uses. In Python each feature costs a string join, a hashlib call and a bytes object,
 * and cutting a page into words with ``re.findall`` alone takes longer than all of this
 * module: here a text is read once, its words written as UTF-8 into one buffer with one
 * space between them, so that each shingle is a slice of that buffer, hashed with
 * BLAKE2b-64 (RFC 7693: unkeyed, digest length 8) written out below, and counted in the
 * bit votes without a Python object per word or per feature.
 *
 * Strings are encoded as Python's ``encode("utf-8", "surrogatepass")`` does: a lone
 * surrogate is the three bytes of its code point.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- BLAKE2b with an 8-byte digest ------------------------------------------------- */

static const uint64_t IV[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL,
    0xa54ff53a5f1d36f1ULL, 0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL,
    0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const uint8_t SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

#define BLOCK 128

static inline uint64_t
rotr64(uint64_t x, unsigned n)
{
    return (x >> n) | (x << (64 - n));
}

static inline uint64_t
load64(const uint8_t *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24
           | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48
           | (uint64_t)p[7] << 56;
}

#define G(a, b, c, d, x, y)          \
    do {                             \
        a = a + b + (x);             \
        d = rotr64(d ^ a, 32);       \
        c = c + d;                   \
        b = rotr64(b ^ c, 24);       \
        a = a + b + (y);             \
        d = rotr64(d ^ a, 16);       \
        c = c + d;                   \
        b = rotr64(b ^ c, 63);       \
    } while (0)

#define ROUND(r)                                                      \
    do {                                                              \
        G(v0, v4, v8, v12, m[SIGMA[r][0]], m[SIGMA[r][1]]);          \
        G(v1, v5, v9, v13, m[SIGMA[r][2]], m[SIGMA[r][3]]);          \
        G(v2, v6, v10, v14, m[SIGMA[r][4]], m[SIGMA[r][5]]);         \
        G(v3, v7, v11, v15, m[SIGMA[r][6]], m[SIGMA[r][7]]);         \
        G(v0, v5, v10, v15, m[SIGMA[r][8]], m[SIGMA[r][9]]);         \
        G(v1, v6, v11, v12, m[SIGMA[r][10]], m[SIGMA[r][11]]);       \
        G(v2, v7, v8, v13, m[SIGMA[r][12]], m[SIGMA[r][13]]);        \
        G(v3, v4, v9, v14, m[SIGMA[r][14]], m[SIGMA[r][15]]);        \
    } while (0)

/* The compression function F of RFC 7693, section 3.2: the state h after the block
 * ``block``, ``counter`` bytes of the message having been read, the last block when
 * ``last``. */
static void
compress(uint64_t h[8], const uint8_t block[BLOCK], uint64_t counter, int last)
{
    uint64_t m[16];
    for (int i = 0; i < 16; i++) {
        m[i] = load64(block + 8 * i);
    }
    uint64_t v0 = h[0], v1 = h[1], v2 = h[2], v3 = h[3];
    uint64_t v4 = h[4], v5 = h[5], v6 = h[6], v7 = h[7];
    uint64_t v8 = IV[0], v9 = IV[1], v10 = IV[2], v11 = IV[3];
    uint64_t v12 = IV[4] ^ counter, v13 = IV[5], v14 = last ? ~IV[6] : IV[6], v15 = IV[7];
    ROUND(0);
    ROUND(1);
    ROUND(2);
    ROUND(3);
    ROUND(4);
    ROUND(5);
    ROUND(6);
    ROUND(7);
    ROUND(8);
    ROUND(9);
    ROUND(10);
    ROUND(11);
    h[0] ^= v0 ^ v8;
    h[1] ^= v1 ^ v9;
    h[2] ^= v2 ^ v10;
    h[3] ^= v3 ^ v11;
    h[4] ^= v4 ^ v12;
    h[5] ^= v5 ^ v13;
    h[6] ^= v6 ^ v14;
    h[7] ^= v7 ^ v15;
}

/* BLAKE2b of the ``size`` bytes at ``data``, unkeyed, with an 8-byte digest, as the
 * little-endian number those 8 bytes are (the first word of the state). The counter's
 * high word stays 0: no feature is 2**64 bytes long. */
static uint64_t
blake2b64(const uint8_t *data, size_t size)
{
    uint64_t h[8];
    memcpy(h, IV, sizeof(h));
    h[0] ^= 0x01010000u ^ 8u; /* fanout 1, depth 1, no key, digest length 8 */
    size_t done = 0;
    while (size - done > BLOCK) {
        done += BLOCK;
        compress(h, data + done - BLOCK, done, 0);
    }
    uint8_t last[BLOCK] = {0};
    memcpy(last, data + done, size - done);
    compress(h, last, size, 1);
    return h[0];
}

/* ---- Votes --------------------------------------------------------------------------- */

#define LANES 0x0101010101010101ULL

/* How many digests have each of the 64 bits set. Counts go first into eight words of
 * eight byte-wide counters (word j, byte k counts bit 8k + j), eight additions a digest,
 * and into ``totals`` before a byte can overflow. */
typedef struct {
    uint64_t lanes[8];
    unsigned pending;
    Py_ssize_t totals[64];
    Py_ssize_t digests;
} Votes;

static void
votes_flush(Votes *votes)
{
    for (int j = 0; j < 8; j++) {
        for (int k = 0; k < 8; k++) {
            votes->totals[8 * k + j] += (Py_ssize_t)((votes->lanes[j] >> (8 * k)) & 0xFF);
        }
        votes->lanes[j] = 0;
    }
    votes->pending = 0;
}

static inline void
votes_add(Votes *votes, uint64_t digest)
{
    for (int j = 0; j < 8; j++) {
        votes->lanes[j] += (digest >> j) & LANES;
    }
    votes->digests++;
    if (++votes->pending == 255) {
        votes_flush(votes);
    }
}

/* The signed SimHash: bit n set when more than half of the digests have it set. */
static PyObject *
votes_result(Votes *votes)
{
    votes_flush(votes);
    uint64_t value = 0;
    for (int bit = 0; bit < 64; bit++) {
        if (2 * votes->totals[bit] > votes->digests) {
            value |= (uint64_t)1 << bit;
        }
    }
    return PyLong_FromLongLong((long long)(int64_t)value);
}

/* ---- Text ---------------------------------------------------------------------------- */

/* The UTF-8 bytes of the code point ``ch`` (a surrogate as its three bytes) at ``out``;
 * returns the end. */
static inline uint8_t *
put_utf8(uint8_t *out, Py_UCS4 ch)
{
    if (ch < 0x80) {
        *out++ = (uint8_t)ch;
    }
    else if (ch < 0x800) {
        *out++ = (uint8_t)(0xC0 | (ch >> 6));
        *out++ = (uint8_t)(0x80 | (ch & 0x3F));
    }
    else if (ch < 0x10000) {
        *out++ = (uint8_t)(0xE0 | (ch >> 12));
        *out++ = (uint8_t)(0x80 | ((ch >> 6) & 0x3F));
        *out++ = (uint8_t)(0x80 | (ch & 0x3F));
    }
    else {
        *out++ = (uint8_t)(0xF0 | (ch >> 18));
        *out++ = (uint8_t)(0x80 | ((ch >> 12) & 0x3F));
        *out++ = (uint8_t)(0x80 | ((ch >> 6) & 0x3F));
        *out++ = (uint8_t)(0x80 | (ch & 0x3F));
    }
    return out;
}

/* Most UTF-8 bytes one code point of a string of this kind takes. */
static Py_ssize_t
utf8_width(int kind)
{
    return kind == PyUnicode_1BYTE_KIND ? 2 : kind == PyUnicode_2BYTE_KIND ? 3 : 4;
}

static const uint8_t ASCII_WORD[128] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
    ['8'] = 1, ['9'] = 1, ['_'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1,
    ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1,
    ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
    ['Y'] = 1, ['Z'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
    ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1,
};

/* Whether ``ch`` is matched by ``\w`` in a Python ``re`` pattern of str (the module
 * _sre: a letter, a digit or a numeric character, or the underscore). */
static inline int
is_word(Py_UCS4 ch)
{
    return ch < 128 ? ASCII_WORD[ch] : (Py_UNICODE_ISALNUM(ch) ? 1 : 0);
}

/* Whether ``ch`` counts for ``str.isdigit``. */
static inline int
is_digit(Py_UCS4 ch)
{
    return ch < 128 ? (ch >= '0' && ch <= '9') : (Py_UNICODE_ISDIGIT(ch) ? 1 : 0);
}

/* A text's words, as ``re.findall(r"\w+", text)`` finds them, a word made only of digits
 * written ``0``: their UTF-8 bytes one space apart in ``bytes``, word i from
 * ``starts[i]`` to ``ends[i]``. */
typedef struct {
    uint8_t *bytes;
    Py_ssize_t *starts;
    Py_ssize_t *ends;
    Py_ssize_t count;
} Words;

static void
words_free(Words *words)
{
    PyMem_Free(words->bytes);
    PyMem_Free(words->starts);
    PyMem_Free(words->ends);
}

static int
words_read(Words *words, PyObject *text)
{
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    const Py_ssize_t most = length / 2 + 1; /* words are at least one apart */
    words->count = 0;
    words->bytes = PyMem_Malloc((size_t)(length * utf8_width(kind) + 1));
    words->starts = PyMem_Malloc((size_t)most * sizeof(Py_ssize_t));
    words->ends = PyMem_Malloc((size_t)most * sizeof(Py_ssize_t));
    if (words->bytes == NULL || words->starts == NULL || words->ends == NULL) {
        words_free(words);
        PyErr_NoMemory();
        return -1;
    }
    uint8_t *const start = words->bytes;
    uint8_t *out = start;
    Py_ssize_t i = 0;
    while (i < length) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (!is_word(ch)) {
            i++;
            continue;
        }
        if (words->count) {
            *out++ = ' ';
        }
        uint8_t *word = out;
        int digits = 1;
        do {
            digits &= is_digit(ch);
            out = put_utf8(out, ch);
            if (++i == length) {
                break;
            }
            ch = PyUnicode_READ(kind, data, i);
        } while (is_word(ch));
        if (digits) {
            out = word;
            *out++ = '0';
        }
        words->starts[words->count] = word - start;
        words->ends[words->count] = out - start;
        words->count++;
    }
    return 0;
}

/* An open-addressing set of features by digest, each slot a digest and the feature's
 * number + 1 (0: free), so that a feature seen before, bytes compared, is not counted
 * twice. */
typedef struct {
    uint64_t *digests;
    Py_ssize_t *features;
    size_t mask;
} Seen;

static int
seen_init(Seen *seen, Py_ssize_t entries)
{
    size_t slots = 8;
    while (slots < 2 * (size_t)entries) {
        slots *= 2;
    }
    seen->mask = slots - 1;
    seen->digests = PyMem_Malloc(slots * sizeof(uint64_t));
    seen->features = PyMem_Calloc(slots, sizeof(Py_ssize_t));
    if (seen->digests == NULL || seen->features == NULL) {
        PyMem_Free(seen->digests);
        PyMem_Free(seen->features);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void
seen_free(Seen *seen)
{
    PyMem_Free(seen->digests);
    PyMem_Free(seen->features);
}

PyDoc_STRVAR(shingle_simhash_doc,
"shingle_simhash(text, size) -> int\n\n"
"The signed 64-bit SimHash of the distinct runs of ``size`` consecutive words of\n"
"``text`` (one feature, all its words, when it has ``size`` or fewer), each joined by\n"
"one space: words as ``re.findall(r\"\\w+\", text)`` finds them, one made only of\n"
"digits (``str.isdigit``) written ``0``. ``text`` is taken as it is (lower-case it\n"
"first). 0 for a text without words.");

static PyObject *
shingle_simhash(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "shingle_simhash(text: str, size: int)");
        return NULL;
    }
    Py_ssize_t size = PyLong_AsSsize_t(args[1]);
    if (size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (size < 1) {
        PyErr_SetString(PyExc_ValueError, "a shingle has at least one word");
        return NULL;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(args[0]) < 0) {
        return NULL;
    }
#endif
    Words words;
    if (words_read(&words, args[0]) < 0) {
        return NULL;
    }
    Py_ssize_t features = words.count == 0      ? 0
                          : words.count <= size ? 1
                                                : words.count - size + 1;
    Seen seen;
    if (seen_init(&seen, features) < 0) {
        words_free(&words);
        return NULL;
    }
    Votes votes = {0};
    for (Py_ssize_t f = 0; f < features; f++) {
        const Py_ssize_t begin = words.starts[f];
        const Py_ssize_t end = words.ends[f + size <= words.count ? f + size - 1 : words.count - 1];
        const uint8_t *bytes = words.bytes + begin;
        const size_t length = (size_t)(end - begin);
        const uint64_t digest = blake2b64(bytes, length);
        size_t slot = (size_t)digest & seen.mask;
        int again = 0;
        while (seen.features[slot]) {
            if (seen.digests[slot] == digest) {
                const Py_ssize_t other = seen.features[slot] - 1;
                const Py_ssize_t last =
                    other + size <= words.count ? other + size - 1 : words.count - 1;
                const Py_ssize_t other_begin = words.starts[other];
                if ((size_t)(words.ends[last] - other_begin) == length
                    && memcmp(words.bytes + other_begin, bytes, length) == 0) {
                    again = 1;
                    break;
                }
            }
            slot = (slot + 1) & seen.mask;
        }
        if (!again) {
            seen.digests[slot] = digest;
            seen.features[slot] = f + 1;
            votes_add(&votes, digest);
        }
    }
    seen_free(&seen);
    words_free(&words);
    return votes_result(&votes);
}

/* ---- Features ------------------------------------------------------------------------ */

PyDoc_STRVAR(simhash_doc,
"simhash(features) -> int\n\n"
"The signed 64-bit SimHash of the strings ``features`` (each counted once for each\n"
"time it comes: give distinct ones), each hashed in UTF-8, lone surrogates passed\n"
"through. 0 when there are none.");

static PyObject *
simhash(PyObject *module, PyObject *features)
{
    PyObject *iterator = PyObject_GetIter(features);
    if (iterator == NULL) {
        return NULL;
    }
    Votes votes = {0};
    uint8_t *buffer = NULL;
    Py_ssize_t capacity = 0;
    PyObject *item;
    while ((item = PyIter_Next(iterator)) != NULL) {
        if (!PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError, "a feature is a str, not %.100s",
                         Py_TYPE(item)->tp_name);
            goto failed;
        }
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(item) < 0) {
            goto failed;
        }
#endif
        const int kind = PyUnicode_KIND(item);
        const void *data = PyUnicode_DATA(item);
        const Py_ssize_t length = PyUnicode_GET_LENGTH(item);
        const uint8_t *bytes;
        size_t size;
        if (PyUnicode_IS_ASCII(item)) {
            bytes = data;
            size = (size_t)length;
        }
        else {
            const Py_ssize_t needed = length * utf8_width(kind);
            if (needed > capacity) {
                PyMem_Free(buffer);
                buffer = PyMem_Malloc((size_t)needed);
                if (buffer == NULL) {
                    PyErr_NoMemory();
                    goto failed;
                }
                capacity = needed;
            }
            uint8_t *out = buffer;
            for (Py_ssize_t i = 0; i < length; i++) {
                out = put_utf8(out, PyUnicode_READ(kind, data, i));
            }
            bytes = buffer;
            size = (size_t)(out - buffer);
        }
        votes_add(&votes, blake2b64(bytes, size));
        Py_DECREF(item);
    }
    PyMem_Free(buffer);
    Py_DECREF(iterator);
    if (PyErr_Occurred()) {
        return NULL;
    }
    return votes_result(&votes);
failed:
    Py_DECREF(item);
    PyMem_Free(buffer);
    Py_DECREF(iterator);
    return NULL;
}

static PyMethodDef simhash_functions[] = {
    {"simhash", (PyCFunction)simhash, METH_O, simhash_doc},
    {"shingle_simhash", (PyCFunction)(void (*)(void))shingle_simhash, METH_FASTCALL,
     shingle_simhash_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef simhash_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "trawl.content._simhash",
    .m_doc = "64-bit SimHashes of features and of a text's word shingles "
             "(trawl.content.simhash).",
    .m_size = -1,
    .m_methods = simhash_functions,
};

PyMODINIT_FUNC
PyInit__simhash(void)
{
    return PyModule_Create(&simhash_module);
}
