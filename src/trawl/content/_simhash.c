/* The 64-bit SimHash of trawl.content.simhash, and of a text's word shingles, in C.
 *
 * The same values as the Python references (trawl.content.simhash.reference_simhash,
 * and trawl.content.text's ``_features`` fed to it), which a build without compiling
 * uses. In Python each feature costs a string join, a hashlib call and a bytes object,
 * and cutting a page into words with ``re.findall`` alone takes longer than all of this
 * module: here a text is read once, its words written as UTF-8 into one buffer with one
 * space between them, so that each shingle is a slice of that buffer, hashed with
 * BLAKE2b-64 (RFC 7693: unkeyed, digest length 8) written out below, four shingles at a
 * time where the processor has AVX2, and counted in the bit votes without a Python
 * object per word or per feature. A shingle equal to an earlier one is left out, its
 * bytes compared, as the reference's set of strings leaves it out.
 *
 * Strings are encoded as Python's ``encode("utf-8", "surrogatepass")`` does: a lone
 * surrogate is the three bytes of its code point.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define FOUR_LANES 1
#include <immintrin.h>
#endif

/* ---- BLAKE2b with an 8-byte digest ------------------------------------------------- */

static const uint64_t IV[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL,
    0xa54ff53a5f1d36f1ULL, 0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL,
    0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const uint8_t SIGMA[10][16] = {
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
};

#define BLOCK 128
#define PARAMETERS 0x01010008u /* fanout 1, depth 1, no key, digest length 8 */

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

/* The mixing function G of RFC 7693, section 3.1, on the words a, b, c and d of the work
 * vector v with the message words x and y of m. */
#define G(a, b, c, d, x, y)                      \
    do {                                         \
        v[a] = v[a] + v[b] + m[x];               \
        v[d] = rotr64(v[d] ^ v[a], 32);          \
        v[c] = v[c] + v[d];                      \
        v[b] = rotr64(v[b] ^ v[c], 24);          \
        v[a] = v[a] + v[b] + m[y];               \
        v[d] = rotr64(v[d] ^ v[a], 16);          \
        v[c] = v[c] + v[d];                      \
        v[b] = rotr64(v[b] ^ v[c], 63);          \
    } while (0)

/* Round r of the compression function, with the mixing function ``mix``. */
#define ROUND(mix, r)                                                       \
    do {                                                                    \
        const uint8_t *s = SIGMA[(r) % 10];                                 \
        mix(0, 4, 8, 12, s[0], s[1]);                                       \
        mix(1, 5, 9, 13, s[2], s[3]);                                       \
        mix(2, 6, 10, 14, s[4], s[5]);                                      \
        mix(3, 7, 11, 15, s[6], s[7]);                                      \
        mix(0, 5, 10, 15, s[8], s[9]);                                      \
        mix(1, 6, 11, 12, s[10], s[11]);                                    \
        mix(2, 7, 8, 13, s[12], s[13]);                                     \
        mix(3, 4, 9, 14, s[14], s[15]);                                     \
    } while (0)

/* The compression function F of RFC 7693, section 3.2: the state h after the block
 * ``block``, ``counter`` bytes of the message having been read, the last block when
 * ``last``. */
static void
compress(uint64_t h[8], const uint8_t block[BLOCK], uint64_t counter, int last)
{
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++) {
        m[i] = load64(block + 8 * i);
        v[i] = i < 8 ? h[i] : IV[i - 8];
    }
    v[12] ^= counter;
    v[14] = last ? ~v[14] : v[14];
    /* Unrolled: the message words each round reads are then known when compiling. */
    ROUND(G, 0); ROUND(G, 1); ROUND(G, 2); ROUND(G, 3); ROUND(G, 4); ROUND(G, 5);
    ROUND(G, 6); ROUND(G, 7); ROUND(G, 8); ROUND(G, 9); ROUND(G, 10); ROUND(G, 11);
    for (int i = 0; i < 8; i++) {
        h[i] ^= v[i] ^ v[i + 8];
    }
}

/* BLAKE2b of the ``size`` bytes at ``data``, unkeyed, with an 8-byte digest, as the
 * little-endian number those 8 bytes are (the first word of the state). The counter's
 * high word stays 0: no feature is 2**64 bytes long. */
static uint64_t
blake2b64(const uint8_t *data, size_t size)
{
    uint64_t h[8];
    memcpy(h, IV, sizeof(h));
    h[0] ^= PARAMETERS;
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

/* ---- BLAKE2b of four features at once ------------------------------------------------ */

/* Slack after the last byte a feature can be read from: four lanes read a whole block from
 * the start of a feature, the bytes past its end masked off. */
#define SLACK BLOCK

#ifdef FOUR_LANES
/* Where the processor has AVX2, four features of at most one block are hashed side by
 * side, one in each 64-bit lane of the 256-bit registers: a page's features are
 * independent, and one hash at a time leaves most of the processor idle while each step
 * waits for the one before it. */
#define X4 __attribute__((target("avx2")))

#define ADD(a, b) _mm256_add_epi64(a, b)
#define XOR(a, b) _mm256_xor_si256(a, b)

/* Rotations right of each lane: by whole bytes with a shuffle, by 63 as one left. */
#define ROT32(x) _mm256_shuffle_epi32(x, _MM_SHUFFLE(2, 3, 0, 1))
#define ROT24(x) _mm256_shuffle_epi8(x, by3)
#define ROT16(x) _mm256_shuffle_epi8(x, by2)
#define ROT63(x) _mm256_or_si256(_mm256_srli_epi64(x, 63), ADD(x, x))

/* G on four lanes. */
#define G4(a, b, c, d, x, y)                 \
    do {                                     \
        v[a] = ADD(ADD(v[a], v[b]), m[x]);   \
        v[d] = ROT32(XOR(v[d], v[a]));       \
        v[c] = ADD(v[c], v[d]);              \
        v[b] = ROT24(XOR(v[b], v[c]));       \
        v[a] = ADD(ADD(v[a], v[b]), m[y]);   \
        v[d] = ROT16(XOR(v[d], v[a]));       \
        v[c] = ADD(v[c], v[d]);              \
        v[b] = ROT63(XOR(v[b], v[c]));       \
    } while (0)

/* 32 bytes from ``at`` with those from byte ``size`` of the feature on zeroed:
 * ``offset`` is where in the feature ``at`` is (0, 32, 64 or 96). */
X4 static inline __m256i
load_masked(const uint8_t *at, int offset, int size)
{
    const __m256i index = _mm256_add_epi8(
        _mm256_set1_epi8((char)offset),
        _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
                         20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31));
    /* Byte indexes are at most 127 and ``size - 1`` at least -1: both fit a signed byte. */
    const __m256i past = _mm256_cmpgt_epi8(index, _mm256_set1_epi8((char)(size - 1)));
    return _mm256_andnot_si256(past, _mm256_loadu_si256((const __m256i *)at));
}

/* The BLAKE2b-64 digests of four features of at most one block each, at ``data[lane]``
 * with ``size[lane]`` bytes, each followed by at least SLACK readable bytes. */
X4 static void
blake2b64_x4(const uint8_t *const data[4], const size_t size[4], uint64_t digests[4])
{
    __m256i m[16];
    for (int quarter = 0; quarter < 4; quarter++) {
        /* Row ``lane``: words 4 * quarter .. 4 * quarter + 3 of that lane's block; the
         * transposition makes m[i] word i of all four. */
        __m256i rows[4];
        for (int lane = 0; lane < 4; lane++) {
            rows[lane] = load_masked(data[lane] + 32 * quarter, 32 * quarter, (int)size[lane]);
        }
        const __m256i t0 = _mm256_unpacklo_epi64(rows[0], rows[1]);
        const __m256i t1 = _mm256_unpackhi_epi64(rows[0], rows[1]);
        const __m256i t2 = _mm256_unpacklo_epi64(rows[2], rows[3]);
        const __m256i t3 = _mm256_unpackhi_epi64(rows[2], rows[3]);
        m[4 * quarter] = _mm256_permute2x128_si256(t0, t2, 0x20);
        m[4 * quarter + 1] = _mm256_permute2x128_si256(t1, t3, 0x20);
        m[4 * quarter + 2] = _mm256_permute2x128_si256(t0, t2, 0x31);
        m[4 * quarter + 3] = _mm256_permute2x128_si256(t1, t3, 0x31);
    }
    const __m256i by3 = _mm256_setr_epi8(3, 4, 5, 6, 7, 0, 1, 2, 11, 12, 13, 14, 15, 8, 9, 10,
                                         3, 4, 5, 6, 7, 0, 1, 2, 11, 12, 13, 14, 15, 8, 9, 10);
    const __m256i by2 = _mm256_setr_epi8(2, 3, 4, 5, 6, 7, 0, 1, 10, 11, 12, 13, 14, 15, 8, 9,
                                         2, 3, 4, 5, 6, 7, 0, 1, 10, 11, 12, 13, 14, 15, 8, 9);
    __m256i v[16];
    for (int i = 0; i < 8; i++) {
        v[i] = v[i + 8] = _mm256_set1_epi64x((long long)IV[i]);
    }
    const __m256i h0 = v[0] = _mm256_set1_epi64x((long long)(IV[0] ^ PARAMETERS));
    v[12] = XOR(v[12], _mm256_setr_epi64x((long long)size[0], (long long)size[1],
                                          (long long)size[2], (long long)size[3]));
    v[14] = _mm256_set1_epi64x((long long)~IV[6]);
    for (int r = 0; r < 12; r++) {
        ROUND(G4, r);
    }
    _mm256_storeu_si256((__m256i *)digests, XOR(h0, XOR(v[0], v[8])));
}

/* Whether this processor runs blake2b64_x4 (set when the module loads). */
static int four_lanes;
#endif

/* The digests of ``count`` features, feature f the ``size[f]`` bytes at ``data[f]``, each
 * followed by at least SLACK readable bytes: four at a time where the processor can and
 * the next four take a block each, else one. */
static void
blake2b64_all(const uint8_t *const *data, const size_t *size, Py_ssize_t count,
              uint64_t *digests)
{
    for (Py_ssize_t f = 0; f < count; f++) {
#ifdef FOUR_LANES
        if (four_lanes && count - f >= 4 && size[f] <= BLOCK && size[f + 1] <= BLOCK
            && size[f + 2] <= BLOCK && size[f + 3] <= BLOCK) {
            blake2b64_x4(data + f, size + f, digests + f);
            f += 3;
            continue;
        }
#endif
        digests[f] = blake2b64(data[f], size[f]);
    }
}

/* ---- Votes --------------------------------------------------------------------------- */

#define LANES 0x0101010101010101ULL

/* The signed SimHash of ``count`` digests: bit n set when more than half of them have it
 * set. The bits are counted in eight words of eight byte-wide counters (word j, byte k
 * counts bit 8k + j), eight additions a digest, emptied into ``totals`` every 255. */
static PyObject *
majority(const uint64_t *digests, Py_ssize_t count)
{
    Py_ssize_t totals[64] = {0};
    for (Py_ssize_t first = 0; first < count; first += 255) {
        uint64_t lanes[8] = {0};
        for (Py_ssize_t f = first; f < count && f < first + 255; f++) {
            for (int j = 0; j < 8; j++) {
                lanes[j] += (digests[f] >> j) & LANES;
            }
        }
        for (int bit = 0; bit < 64; bit++) {
            totals[bit] += (Py_ssize_t)((lanes[bit % 8] >> (8 * (bit / 8))) & 0xFF);
        }
    }
    uint64_t value = 0;
    for (int bit = 0; bit < 64; bit++) {
        value |= (uint64_t)(2 * totals[bit] > count) << bit;
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
        return out;
    }
    const int tail = ch < 0x800 ? 1 : ch < 0x10000 ? 2 : 3; /* bytes after the first */
    *out++ = (uint8_t)((0xFFu << (7 - tail)) | (ch >> (6 * tail)));
    for (int i = tail - 1; i >= 0; i--) {
        *out++ = (uint8_t)(0x80 | ((ch >> (6 * i)) & 0x3F));
    }
    return out;
}

/* Most UTF-8 bytes one code point of a string of this kind takes. */
static Py_ssize_t
utf8_width(int kind)
{
    return kind == PyUnicode_1BYTE_KIND ? 2 : kind == PyUnicode_2BYTE_KIND ? 3 : 4;
}

/* Whether ``ch`` is matched by ``\w`` in a Python ``re`` pattern of str (the module
 * _sre: a letter, a digit or a numeric character, or the underscore). */
static inline int
is_word(Py_UCS4 ch)
{
    if (ch < 128) {
        return (ch | 0x20) - 'a' < 26 || ch - '0' < 10 || ch == '_';
    }
    return Py_UNICODE_ISALNUM(ch) ? 1 : 0;
}

/* Whether ``ch`` counts for ``str.isdigit``. */
static inline int
is_digit(Py_UCS4 ch)
{
    return ch < 128 ? ch - '0' < 10 : (Py_UNICODE_ISDIGIT(ch) ? 1 : 0);
}

/* A text's words, as ``re.findall(r"\w+", text)`` finds them, a word made only of digits
 * written ``0``: their UTF-8 bytes one space apart in ``bytes``, word i ending at
 * ``ends[i]`` (and starting after the space that follows word i - 1). */
typedef struct {
    uint8_t *bytes;
    Py_ssize_t *ends;
    Py_ssize_t count;
} Words;

/* The words of the ``length`` characters of ``kind`` at ``data`` into ``words``, whose
 * arrays are large enough. Inlined for each kind, so that reading a character is one
 * load. */
static inline void
words_split(Words *words, const int kind, const void *data, const Py_ssize_t length)
{
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
        words->ends[words->count] = out - start;
        words->count++;
    }
}

static int
words_read(Words *words, PyObject *text)
{
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    const Py_ssize_t most = length / 2 + 1; /* words are at least one apart */
    words->count = 0;
    words->bytes = PyMem_Malloc((size_t)(length * utf8_width(kind) + SLACK));
    words->ends = PyMem_Malloc((size_t)most * sizeof(Py_ssize_t));
    if (words->bytes == NULL || words->ends == NULL) {
        PyMem_Free(words->bytes);
        PyMem_Free(words->ends);
        PyErr_NoMemory();
        return -1;
    }
    switch (kind) {
    case PyUnicode_1BYTE_KIND:
        words_split(words, PyUnicode_1BYTE_KIND, data, length);
        break;
    case PyUnicode_2BYTE_KIND:
        words_split(words, PyUnicode_2BYTE_KIND, data, length);
        break;
    default:
        words_split(words, PyUnicode_4BYTE_KIND, data, length);
    }
    return 0;
}

/* The signed SimHash of ``count`` features, feature f the ``sizes[f]`` bytes at
 * ``data[f]``, each followed by at least SLACK readable bytes. With ``once``, a feature
 * equal to an earlier one is left out: the digests go into an open-addressing set, each
 * slot a digest and the number + 1 of its feature (0: free), and a feature whose digest
 * is there is compared byte by byte (equal digests of different features count twice,
 * as in the reference's set of strings). */
static PyObject *
simhash_of(const uint8_t *const *data, const size_t *sizes, Py_ssize_t count, int once)
{
    size_t slots = 8;
    while (once && slots < 2 * (size_t)count) {
        slots *= 2;
    }
    const size_t mask = slots - 1;
    uint64_t *digests = PyMem_Malloc((size_t)(count + 1) * sizeof(uint64_t));
    uint64_t *seen_digests = PyMem_Malloc(slots * sizeof(uint64_t));
    Py_ssize_t *seen = PyMem_Calloc(slots, sizeof(Py_ssize_t));
    PyObject *result = NULL;
    if (digests == NULL || seen_digests == NULL || seen == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    blake2b64_all(data, sizes, count, digests);
    Py_ssize_t kept = 0;
    for (Py_ssize_t f = 0; f < count; f++) {
        const uint64_t digest = digests[f];
        size_t slot = (size_t)digest & mask;
        int again = 0;
        while (once && seen[slot]) {
            const Py_ssize_t other = seen[slot] - 1;
            if (seen_digests[slot] == digest && sizes[other] == sizes[f]
                && memcmp(data[other], data[f], sizes[f]) == 0) {
                again = 1;
                break;
            }
            slot = (slot + 1) & mask;
        }
        if (!again) {
            seen_digests[slot] = digest;
            seen[slot] = f + 1;
            digests[kept++] = digest;
        }
    }
    result = majority(digests, kept);
done:
    PyMem_Free(digests);
    PyMem_Free(seen_digests);
    PyMem_Free(seen);
    return result;
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
    /* One feature when there are ``size`` words or fewer, none without words. */
    const Py_ssize_t count = words.count <= size ? words.count > 0 : words.count - size + 1;
    const uint8_t **data = PyMem_Malloc((size_t)(count + 1) * sizeof(uint8_t *));
    size_t *sizes = PyMem_Malloc((size_t)(count + 1) * sizeof(size_t));
    PyObject *result = NULL;
    if (data == NULL || sizes == NULL) {
        PyErr_NoMemory();
    }
    else {
        for (Py_ssize_t f = 0; f < count; f++) {
            const Py_ssize_t last = size <= words.count - f ? f + size - 1 : words.count - 1;
            const Py_ssize_t first = f == 0 ? 0 : words.ends[f - 1] + 1;
            data[f] = words.bytes + first;
            sizes[f] = (size_t)(words.ends[last] - first);
        }
        result = simhash_of(data, sizes, count, 1);
    }
    PyMem_Free(data);
    PyMem_Free(sizes);
    PyMem_Free(words.bytes);
    PyMem_Free(words.ends);
    return result;
}

/* ---- Features ------------------------------------------------------------------------ */

PyDoc_STRVAR(simhash_doc,
"simhash(features) -> int\n\n"
"The signed 64-bit SimHash of the strings ``features`` (each counted as often as it\n"
"comes: give distinct ones), each hashed in UTF-8, lone surrogates passed through.\n"
"0 when there are none.");

static PyObject *
simhash(PyObject *module, PyObject *features)
{
    PyObject *items = PySequence_Fast(features, "features must be iterable");
    if (items == NULL) {
        return NULL;
    }
    const Py_ssize_t count = PySequence_Fast_GET_SIZE(items);
    PyObject **item = PySequence_Fast_ITEMS(items);
    size_t most = SLACK; /* bytes of all features' UTF-8, one after the other */
    for (Py_ssize_t f = 0; f < count; f++) {
        if (!PyUnicode_Check(item[f])) {
            PyErr_Format(PyExc_TypeError, "a feature is a str, not %.100s",
                         Py_TYPE(item[f])->tp_name);
            Py_DECREF(items);
            return NULL;
        }
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(item[f]) < 0) {
            Py_DECREF(items);
            return NULL;
        }
#endif
        most += (size_t)(PyUnicode_GET_LENGTH(item[f]) * utf8_width(PyUnicode_KIND(item[f])));
    }
    uint8_t *bytes = PyMem_Malloc(most);
    const uint8_t **data = PyMem_Malloc((size_t)(count + 1) * sizeof(uint8_t *));
    size_t *sizes = PyMem_Malloc((size_t)(count + 1) * sizeof(size_t));
    PyObject *result = NULL;
    if (bytes == NULL || data == NULL || sizes == NULL) {
        PyErr_NoMemory();
    }
    else {
        uint8_t *out = bytes;
        for (Py_ssize_t f = 0; f < count; f++) {
            const int kind = PyUnicode_KIND(item[f]);
            const void *chars = PyUnicode_DATA(item[f]);
            const Py_ssize_t length = PyUnicode_GET_LENGTH(item[f]);
            data[f] = out;
            if (PyUnicode_IS_ASCII(item[f])) {
                memcpy(out, chars, (size_t)length);
                out += length;
            }
            else {
                for (Py_ssize_t i = 0; i < length; i++) {
                    out = put_utf8(out, PyUnicode_READ(kind, chars, i));
                }
            }
            sizes[f] = (size_t)(out - data[f]);
        }
        result = simhash_of(data, sizes, count, 0);
    }
    PyMem_Free(bytes);
    PyMem_Free(data);
    PyMem_Free(sizes);
    Py_DECREF(items);
    return result;
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
#ifdef FOUR_LANES
    __builtin_cpu_init();
    four_lanes = __builtin_cpu_supports("avx2");
#endif
    return PyModule_Create(&simhash_module);
}
