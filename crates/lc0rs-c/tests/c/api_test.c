/*
 * The C interface from C: normal use and misuse. Built with the system's cc against
 * include/lc0rs.h and the shared library, and run by tests/c_program.rs, which compares what
 * this prints with the Rust library's own cpu backend.
 *
 * Usage: api_test PLANES_FILE POSITIONS_FILE NET_FILE
 *   PLANES_FILE: one position a line, 112 pairs "MASK VALUE" (lc0's input planes).
 *   POSITIONS_FILE: one position a line, "FEN<TAB>MOVES" ("startpos" for the start position).
 *   NET_FILE: the bundled tiny net's file (weights/tiny.pb.gz): read into memory and opened
 *   with lc0rs_net_open_bytes, it must give exactly the outputs of "bundled:tiny".
 * Prints, for every position (planes first, then FENs, in file order):
 *   out SAMPLE Q D M W D L
 *   policy SAMPLE LOGIT0 ... LOGIT1857
 *   moves SAMPLE MOVE:INDEX ...         (FEN positions only)
 * then "info ...", and exits 0 only if every misuse check passed.
 */
#include "lc0rs.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static int checks = 0;

/* A call must return `want`, and on failure leave a message containing `part`. */
#define EXPECT(call, want, part) expect_status((call), (want), (part), #call, __LINE__)

static void expect_status(lc0rs_status got, lc0rs_status want, const char *part,
                          const char *text, int line) {
    const char *message = lc0rs_last_error();
    checks++;
    if (got != want) {
        fprintf(stderr, "line %d: %s returned %s, expected %s (%s)\n", line, text,
                lc0rs_status_name(got), lc0rs_status_name(want), message);
        failures++;
        return;
    }
    if (want == LC0RS_STATUS_OK && message[0] != '\0') {
        fprintf(stderr, "line %d: %s succeeded but left the message \"%s\"\n", line, text,
                message);
        failures++;
    }
    if (want != LC0RS_STATUS_OK && part != NULL && strstr(message, part) == NULL) {
        fprintf(stderr, "line %d: %s: message \"%s\" lacks \"%s\"\n", line, text, message,
                part);
        failures++;
    }
}

#define CHECK(cond) check((cond), #cond, __LINE__)

static void check(int ok, const char *text, int line) {
    checks++;
    if (!ok) {
        fprintf(stderr, "line %d: %s does not hold\n", line, text);
        failures++;
    }
}

static void die(const char *what) {
    fprintf(stderr, "%s: %s\n", what, lc0rs_last_error());
    exit(2);
}

/* Adds every position of both files; returns the number added. */
static size_t add_inputs(lc0rs_computation c, const char *planes_path,
                         const char *positions_path) {
    size_t added = 0;
    FILE *f = fopen(planes_path, "r");
    if (f == NULL) die("planes file");
    for (;;) {
        uint64_t masks[LC0RS_INPUT_PLANES];
        float values[LC0RS_INPUT_PLANES];
        int p;
        for (p = 0; p < (int)LC0RS_INPUT_PLANES; p++) {
            if (fscanf(f, "%" SCNu64 " %f", &masks[p], &values[p]) != 2) break;
        }
        if (p == 0) break;
        if (p != (int)LC0RS_INPUT_PLANES) die("short planes line");
        if (lc0rs_computation_add_planes(c, masks, values) != LC0RS_STATUS_OK) die("add_planes");
        added++;
    }
    fclose(f);
    f = fopen(positions_path, "r");
    if (f == NULL) die("positions file");
    char line[4096];
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0') continue;
        char *tab = strchr(line, '\t');
        const char *moves = "";
        if (tab != NULL) {
            *tab = '\0';
            moves = tab + 1;
        }
        const char *fen = strcmp(line, "startpos") == 0 ? NULL : line;
        if (lc0rs_computation_add_fen(c, fen, moves) != LC0RS_STATUS_OK) die("add_fen");
        added++;
    }
    fclose(f);
    return added;
}

static void print_outputs(lc0rs_computation c, size_t n, size_t planes_count) {
    static float logits[LC0RS_POLICY_SIZE];
    for (size_t i = 0; i < n; i++) {
        float q, d, m, wdl[3];
        EXPECT(lc0rs_computation_get_q(c, i, &q), LC0RS_STATUS_OK, NULL);
        EXPECT(lc0rs_computation_get_d(c, i, &d), LC0RS_STATUS_OK, NULL);
        EXPECT(lc0rs_computation_get_m(c, i, &m), LC0RS_STATUS_OK, NULL);
        EXPECT(lc0rs_computation_get_wdl(c, i, wdl), LC0RS_STATUS_OK, NULL);
        printf("out %zu %.9g %.9g %.9g %.9g %.9g %.9g\n", i, q, d, m, wdl[0], wdl[1], wdl[2]);
        EXPECT(lc0rs_computation_get_policy_logits(c, i, logits, LC0RS_POLICY_SIZE),
               LC0RS_STATUS_OK, NULL);
        printf("policy %zu", i);
        for (size_t k = 0; k < LC0RS_POLICY_SIZE; k++) {
            float one;
            /* The one-by-one reader agrees with the whole-array reader. */
            if (k % 97 == 0) {
                EXPECT(lc0rs_computation_get_policy_logit(c, i, k, &one), LC0RS_STATUS_OK, NULL);
                CHECK(one == logits[k]);
            }
            printf(" %.9g", logits[k]);
        }
        printf("\n");
        if (i < planes_count) continue;
        size_t needed = 0;
        EXPECT(lc0rs_computation_get_legal_moves(c, i, NULL, 0, &needed),
               LC0RS_STATUS_OUT_OF_RANGE, "move buffer");
        CHECK(needed >= 1);
        char *text = malloc(needed);
        EXPECT(lc0rs_computation_get_legal_moves(c, i, text, needed, &needed), LC0RS_STATUS_OK,
               NULL);
        CHECK(strlen(text) + 1 == needed);
        printf("moves %zu", i);
        for (char *move = strtok(text, " "); move != NULL; move = strtok(NULL, " ")) {
            size_t index = 0;
            EXPECT(lc0rs_computation_get_move_index(c, i, move, &index), LC0RS_STATUS_OK, NULL);
            printf(" %s:%zu", move, index);
        }
        printf("\n");
        free(text);
    }
}

struct race {
    lc0rs_computation c;
    atomic_int done;
    lc0rs_status status;
};

/* Computes 20 times. A compute that finds the other thread inside the computation (its size
 * asked at that moment) is refused as BUSY, as the other thread's calls are: it is tried again,
 * and only another status fails the race. */
static void *compute_repeatedly(void *arg) {
    struct race *race = arg;
    lc0rs_status status = LC0RS_STATUS_OK;
    for (int round = 0; round < 20 && status == LC0RS_STATUS_OK; round++) {
        do {
            status = lc0rs_computation_compute(race->c);
        } while (status == LC0RS_STATUS_BUSY && strstr(lc0rs_last_error(), "another thread") != NULL);
    }
    race->status = status;
    atomic_store(&race->done, 1);
    return NULL;
}

struct own {
    lc0rs_net net;
    float q;
    lc0rs_status status;
};

static void *compute_own(void *arg) {
    struct own *own = arg;
    lc0rs_computation c = 0;
    own->status = lc0rs_computation_create(own->net, &c);
    for (int round = 0; round < 5 && own->status == LC0RS_STATUS_OK; round++) {
        own->status = lc0rs_computation_add_fen(c, NULL, "e2e4 e7e5");
        if (own->status == LC0RS_STATUS_OK) own->status = lc0rs_computation_compute(c);
        if (own->status == LC0RS_STATUS_OK) own->status = lc0rs_computation_get_q(c, 0, &own->q);
        if (own->status == LC0RS_STATUS_OK) own->status = lc0rs_computation_clear(c);
    }
    if (own->status == LC0RS_STATUS_OK) own->status = lc0rs_computation_free(c);
    return NULL;
}

static void misuse(lc0rs_net net, size_t planes_count) {
    lc0rs_net other = 0;
    lc0rs_computation c = 0;
    lc0rs_net_info info;
    float value = 0, wdl[3];
    size_t size = 0, index = 0;
    float logits[LC0RS_POLICY_SIZE];

    CHECK(lc0rs_abi_version() == LC0RS_ABI_VERSION);
    CHECK(strlen(lc0rs_version()) > 0);
    CHECK(strcmp(lc0rs_status_name(LC0RS_STATUS_BUSY), "LC0RS_STATUS_BUSY") == 0);
    CHECK(strcmp(lc0rs_status_name(99), "LC0RS_STATUS_UNKNOWN") == 0);

    /* Opening. */
    EXPECT(lc0rs_net_open(NULL, "cpu", NULL, NULL), LC0RS_STATUS_NULL_POINTER, "out");
    EXPECT(lc0rs_net_open("/nonexistent/net.pb.gz", "cpu", NULL, &other), LC0RS_STATUS_LOAD,
           "/nonexistent/net.pb.gz");
    EXPECT(lc0rs_net_open("bundled:nope", "cpu", NULL, &other), LC0RS_STATUS_LOAD, "tiny");
    EXPECT(lc0rs_net_open(NULL, "no-such-backend", NULL, &other), LC0RS_STATUS_BACKEND, "cpu");
    EXPECT(lc0rs_net_open(NULL, "cpu", "bogus=1", &other), LC0RS_STATUS_BACKEND, "bogus");
    EXPECT(lc0rs_net_open(NULL, "cpu", "threads", &other), LC0RS_STATUS_BACKEND, "key=value");
    EXPECT(lc0rs_net_open(NULL, "\xff\xfe", NULL, &other), LC0RS_STATUS_INVALID_ARGUMENT,
           "UTF-8");
    CHECK(other == 0);

    /* Handles: 0, garbage, the wrong kind. */
    EXPECT(lc0rs_net_get_info(0, &info), LC0RS_STATUS_INVALID_HANDLE, "network");
    EXPECT(lc0rs_net_get_info(0xdeadbeef, &info), LC0RS_STATUS_INVALID_HANDLE, "0xdeadbeef");
    EXPECT(lc0rs_net_get_info(net, NULL), LC0RS_STATUS_NULL_POINTER, "out");
    EXPECT(lc0rs_computation_create(net, NULL), LC0RS_STATUS_NULL_POINTER, "out");
    EXPECT(lc0rs_computation_create(net, &c), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_net_get_info(c, &info), LC0RS_STATUS_INVALID_HANDLE, "network");
    EXPECT(lc0rs_computation_size(net, &size), LC0RS_STATUS_INVALID_HANDLE, "computation");
    EXPECT(lc0rs_computation_size(c, NULL), LC0RS_STATUS_NULL_POINTER, "out");

    /* Preparing: both counts at least 1, a live network; a batch above max_batch is taken as
       max_batch. */
    EXPECT(lc0rs_net_prepare(net, 0, 2), LC0RS_STATUS_OUT_OF_RANGE, "max_batch");
    EXPECT(lc0rs_net_prepare(net, 8, 0), LC0RS_STATUS_OUT_OF_RANGE, "threads");
    EXPECT(lc0rs_net_prepare(0xdeadbeef, 8, 2), LC0RS_STATUS_INVALID_HANDLE, "0xdeadbeef");
    EXPECT(lc0rs_net_prepare(c, 8, 2), LC0RS_STATUS_INVALID_HANDLE, "network");
    EXPECT(lc0rs_net_prepare(net, SIZE_MAX, 2), LC0RS_STATUS_OK, NULL);

    /* State: nothing to read before computing; refused positions add nothing. */
    EXPECT(lc0rs_computation_add_fen(c, NULL, "e2e4"), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_get_q(c, 0, &value), LC0RS_STATUS_STATE, "not been computed");
    EXPECT(lc0rs_computation_add_fen(c, "not a fen", NULL), LC0RS_STATUS_POSITION, "FEN");
    EXPECT(lc0rs_computation_add_fen(c, NULL, "e2e4 e7e5 e1e3"), LC0RS_STATUS_POSITION, "e1e3");
    EXPECT(lc0rs_computation_add_fen(c, "8/8/8/8/8/8/8/8 w - - 0 1", NULL),
           LC0RS_STATUS_POSITION, "king");
    EXPECT(lc0rs_computation_add_planes(c, NULL, wdl), LC0RS_STATUS_NULL_POINTER, "masks");
    EXPECT(lc0rs_computation_size(c, &size), LC0RS_STATUS_OK, NULL);
    CHECK(size == 1);
    uint64_t masks[LC0RS_INPUT_PLANES] = {0};
    float values[LC0RS_INPUT_PLANES] = {0};
    EXPECT(lc0rs_computation_add_planes(c, masks, values), LC0RS_STATUS_OK, NULL);

    /* After computing: ranges, buffers, no more positions. */
    EXPECT(lc0rs_computation_compute(c), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_add_fen(c, NULL, NULL), LC0RS_STATUS_STATE, "clear");
    EXPECT(lc0rs_computation_get_q(c, 2, &value), LC0RS_STATUS_OUT_OF_RANGE, "sample 2");
    EXPECT(lc0rs_computation_get_wdl(c, (size_t)-1, wdl), LC0RS_STATUS_OUT_OF_RANGE, "sample");
    EXPECT(lc0rs_computation_get_wdl(c, 0, NULL), LC0RS_STATUS_NULL_POINTER, "out");
    EXPECT(lc0rs_computation_get_policy_logit(c, 0, LC0RS_POLICY_SIZE, &value),
           LC0RS_STATUS_OUT_OF_RANGE, "policy index 1858");
    EXPECT(lc0rs_computation_get_policy_logits(c, 0, logits, 100), LC0RS_STATUS_OUT_OF_RANGE,
           "1858");
    EXPECT(lc0rs_computation_get_move_index(c, 0, "e7e5", &index), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_get_move_index(c, 0, "e2e4", &index), LC0RS_STATUS_POSITION,
           "not a legal move");
    EXPECT(lc0rs_computation_get_move_index(c, 0, NULL, &index), LC0RS_STATUS_NULL_POINTER,
           "uci");
    EXPECT(lc0rs_computation_get_move_index(c, 1, "e7e5", &index), LC0RS_STATUS_STATE,
           "planes");
    /* Cleared, it takes positions again. */
    EXPECT(lc0rs_computation_clear(c), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_get_q(c, 0, &value), LC0RS_STATUS_OUT_OF_RANGE, "sample 0");
    EXPECT(lc0rs_computation_add_fen(c, NULL, NULL), LC0RS_STATUS_OK, NULL);

    /* A second thread using the computation while it computes is refused, never served
     * concurrently. */
    for (size_t i = 0; i < 63; i++) {
        EXPECT(lc0rs_computation_add_fen(c, NULL, "d2d4"), LC0RS_STATUS_OK, NULL);
    }
    int busy_seen = 0, wrong = 0;
    for (int attempt = 0; attempt < 20 && !busy_seen; attempt++) {
        struct race race = {.c = c, .done = 0, .status = LC0RS_STATUS_OK};
        pthread_t thread;
        if (pthread_create(&thread, NULL, compute_repeatedly, &race) != 0) die("pthread");
        while (!atomic_load(&race.done)) {
            lc0rs_status got = lc0rs_computation_size(c, &size);
            if (got == LC0RS_STATUS_BUSY) {
                busy_seen = 1;
                if (strstr(lc0rs_last_error(), "another thread") == NULL) wrong++;
            } else if (got != LC0RS_STATUS_OK || size != 64) {
                wrong++;
            }
        }
        pthread_join(thread, NULL);
        CHECK(race.status == LC0RS_STATUS_OK);
    }
    CHECK(busy_seen);
    CHECK(wrong == 0);
    EXPECT(lc0rs_computation_get_q(c, 63, &value), LC0RS_STATUS_OK, NULL);

    /* Two threads, each with its own computation of one network: both served. */
    struct own a = {.net = net}, b = {.net = net};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, compute_own, &a);
    pthread_create(&tb, NULL, compute_own, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(a.status == LC0RS_STATUS_OK && b.status == LC0RS_STATUS_OK);
    CHECK(a.q == b.q);

    /* Freed handles: use after free and double free are reported. */
    EXPECT(lc0rs_computation_free(c), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_size(c, &size), LC0RS_STATUS_INVALID_HANDLE, "computation");
    EXPECT(lc0rs_computation_compute(c), LC0RS_STATUS_INVALID_HANDLE, "computation");
    EXPECT(lc0rs_computation_free(c), LC0RS_STATUS_INVALID_HANDLE, "already freed");

    /* A computation outlives the network it was made from. */
    EXPECT(lc0rs_net_open(NULL, "cpu", "threads=1", &other), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_create(other, &c), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_net_free(other), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_net_free(other), LC0RS_STATUS_INVALID_HANDLE, "network");
    EXPECT(lc0rs_net_get_info(other, &info), LC0RS_STATUS_INVALID_HANDLE, "network");
    EXPECT(lc0rs_net_prepare(other, 8, 1), LC0RS_STATUS_INVALID_HANDLE, "network");
    EXPECT(lc0rs_computation_create(other, &c), LC0RS_STATUS_INVALID_HANDLE, "network");
    EXPECT(lc0rs_computation_add_fen(c, NULL, "e2e4 e7e5"), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_compute(c), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_get_q(c, 0, &value), LC0RS_STATUS_OK, NULL);
    CHECK(value == a.q);
    EXPECT(lc0rs_computation_free(c), LC0RS_STATUS_OK, NULL);
    (void)planes_count;
}

/* Reads a whole file into a malloc'd buffer; its length in *len. */
static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) die("net file");
    size_t cap = 1 << 16, n = 0, got;
    unsigned char *buf = malloc(cap);
    if (buf == NULL) die("malloc");
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            if (buf == NULL) die("realloc");
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

/* Whether every output of the positions in both files is the same on both networks. */
static int same_outputs(lc0rs_net a, lc0rs_net b, const char *planes_path,
                        const char *positions_path) {
    lc0rs_computation ca = 0, cb = 0;
    int same = 1;
    EXPECT(lc0rs_computation_create(a, &ca), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_create(b, &cb), LC0RS_STATUS_OK, NULL);
    size_t n = add_inputs(ca, planes_path, positions_path);
    CHECK(add_inputs(cb, planes_path, positions_path) == n);
    EXPECT(lc0rs_computation_compute(ca), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_compute(cb), LC0RS_STATUS_OK, NULL);
    for (size_t i = 0; i < n; i++) {
        float wa[3], wb[3], ma, mb;
        static float la[LC0RS_POLICY_SIZE], lb[LC0RS_POLICY_SIZE];
        EXPECT(lc0rs_computation_get_wdl(ca, i, wa), LC0RS_STATUS_OK, NULL);
        EXPECT(lc0rs_computation_get_wdl(cb, i, wb), LC0RS_STATUS_OK, NULL);
        EXPECT(lc0rs_computation_get_m(ca, i, &ma), LC0RS_STATUS_OK, NULL);
        EXPECT(lc0rs_computation_get_m(cb, i, &mb), LC0RS_STATUS_OK, NULL);
        EXPECT(lc0rs_computation_get_policy_logits(ca, i, la, LC0RS_POLICY_SIZE),
               LC0RS_STATUS_OK, NULL);
        EXPECT(lc0rs_computation_get_policy_logits(cb, i, lb, LC0RS_POLICY_SIZE),
               LC0RS_STATUS_OK, NULL);
        if (memcmp(wa, wb, sizeof wa) != 0 || ma != mb || memcmp(la, lb, sizeof la) != 0) {
            same = 0;
        }
    }
    EXPECT(lc0rs_computation_free(ca), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_free(cb), LC0RS_STATUS_OK, NULL);
    return same && n > 0;
}

/* A network opened from memory: the same net as by name; bad bytes are load errors. */
static void from_memory(lc0rs_net net, const char *planes_path, const char *positions_path,
                        const char *net_path) {
    size_t len = 0;
    unsigned char *bytes = read_file(net_path, &len);
    lc0rs_net mem = 0, other = 0;
    EXPECT(lc0rs_net_open_bytes(bytes, len, "tiny.pb.gz", "cpu", "threads=1", &mem),
           LC0RS_STATUS_OK, NULL);
    CHECK(mem != 0);
    CHECK(same_outputs(net, mem, planes_path, positions_path));
    EXPECT(lc0rs_net_free(mem), LC0RS_STATUS_OK, NULL);

    EXPECT(lc0rs_net_open_bytes(bytes, len, NULL, "cpu", NULL, NULL), LC0RS_STATUS_NULL_POINTER,
           "out");
    EXPECT(lc0rs_net_open_bytes(NULL, 10, NULL, "cpu", NULL, &other), LC0RS_STATUS_NULL_POINTER,
           "data");
    EXPECT(lc0rs_net_open_bytes(bytes, 0, "empty", "cpu", NULL, &other), LC0RS_STATUS_LOAD,
           "empty");
    EXPECT(lc0rs_net_open_bytes(bytes, len / 2, "half", "cpu", NULL, &other), LC0RS_STATUS_LOAD,
           "half");
    EXPECT(lc0rs_net_open_bytes((const uint8_t *)"garbage!", 8, NULL, "cpu", NULL, &other),
           LC0RS_STATUS_LOAD, "<memory>");
    EXPECT(lc0rs_net_open_bytes(bytes, len, "tiny.pb.gz", "no-such-backend", NULL, &other),
           LC0RS_STATUS_BACKEND, "cpu");
    CHECK(other == 0);
    free(bytes);
}

/* Reads the planes file into masks[n * 112] and values[n * 112]; returns n. */
static size_t read_planes(const char *planes_path, uint64_t **masks, float **values) {
    size_t n = 0, room = 0;
    *masks = NULL;
    *values = NULL;
    FILE *f = fopen(planes_path, "r");
    if (f == NULL) die("planes file");
    for (;;) {
        if (n == room) {
            room = room * 2 + 4;
            *masks = realloc(*masks, room * LC0RS_INPUT_PLANES * sizeof **masks);
            *values = realloc(*values, room * LC0RS_INPUT_PLANES * sizeof **values);
            if (*masks == NULL || *values == NULL) die("out of memory");
        }
        uint64_t *m = *masks + n * LC0RS_INPUT_PLANES;
        float *v = *values + n * LC0RS_INPUT_PLANES;
        int p;
        for (p = 0; p < (int)LC0RS_INPUT_PLANES; p++) {
            if (fscanf(f, "%" SCNu64 " %f", &m[p], &v[p]) != 2) break;
        }
        if (p == 0) break;
        if (p != (int)LC0RS_INPUT_PLANES) die("short planes line");
        n++;
    }
    fclose(f);
    return n;
}

/* The same positions read in place by lc0rs_computation_compute_planes give the outputs of
 * `full` (the positions added one by one), and its misuse is refused with its status. */
static void compute_planes(lc0rs_net net, size_t n, const uint64_t *masks, const float *values,
                           const uint32_t *counts, const uint16_t *indices, size_t total,
                           lc0rs_computation full) {
    /* One plane more than the positions need, so that the array can start misaligned too. */
    lc0rs_input_plane *planes = malloc((n * LC0RS_INPUT_PLANES + 1) * sizeof *planes);
    for (size_t i = 0; i < n * LC0RS_INPUT_PLANES; i++) {
        planes[i].mask = masks[i];
        planes[i].value = values[i];
    }
    lc0rs_computation c = 0;
    EXPECT(lc0rs_computation_create(net, &c), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_compute_planes(c, n, NULL, counts, indices),
           LC0RS_STATUS_NULL_POINTER, "planes");
    const lc0rs_input_plane *misaligned =
        (const lc0rs_input_plane *)((const char *)planes + 4);
    EXPECT(lc0rs_computation_compute_planes(c, n, misaligned, counts, indices),
           LC0RS_STATUS_INVALID_ARGUMENT, "aligned");
    uint16_t bad = LC0RS_POLICY_SIZE;
    uint32_t one = 1;
    EXPECT(lc0rs_computation_compute_planes(c, 1, planes, &one, &bad), LC0RS_STATUS_OUT_OF_RANGE,
           "policy index");
    EXPECT(lc0rs_computation_add_planes(c, masks, values), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_compute_planes(c, n, planes, counts, indices), LC0RS_STATUS_STATE,
           "holds positions");
    EXPECT(lc0rs_computation_clear(c), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_compute_planes(c, n, planes, counts, indices), LC0RS_STATUS_OK,
           NULL);
    EXPECT(lc0rs_computation_compute_planes(c, n, planes, counts, indices), LC0RS_STATUS_STATE,
           "clear");
    float *q = malloc(n * sizeof *q), *d = malloc(n * sizeof *d), *m = malloc(n * sizeof *m);
    float *logits = malloc(total * sizeof *logits);
    EXPECT(lc0rs_computation_get_picked_outputs(c, n, q, d, m, logits, total), LC0RS_STATUS_OK,
           NULL);
    size_t at = 0;
    int agree = 1;
    for (size_t i = 0; i < n; i++) {
        float fq, fd, fm;
        EXPECT(lc0rs_computation_get_q(full, i, &fq), LC0RS_STATUS_OK, NULL);
        EXPECT(lc0rs_computation_get_d(full, i, &fd), LC0RS_STATUS_OK, NULL);
        EXPECT(lc0rs_computation_get_m(full, i, &fm), LC0RS_STATUS_OK, NULL);
        agree &= q[i] == fq && d[i] == fd && m[i] == fm;
        for (uint32_t k = 0; k < counts[i]; k++, at++) {
            float logit;
            EXPECT(lc0rs_computation_get_policy_logit(full, i, indices[at], &logit),
                   LC0RS_STATUS_OK, NULL);
            agree &= logits[at] == logit;
        }
    }
    CHECK(agree);
    CHECK(at == total);
    /* Planes changed after the call change nothing: the outputs were computed in it. */
    for (size_t i = 0; i < n * LC0RS_INPUT_PLANES; i++) planes[i].mask = 0;
    float again;
    EXPECT(lc0rs_computation_get_picked_outputs(c, n, &again, NULL, NULL, NULL, 0),
           LC0RS_STATUS_OK, NULL);
    CHECK(again == q[0]);
    EXPECT(lc0rs_computation_free(c), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_compute_planes(c, n, planes, counts, indices),
           LC0RS_STATUS_INVALID_HANDLE, "not a live handle");
    free(q);
    free(d);
    free(m);
    free(logits);
    free(planes);
}

/* Positions added with their picks give the outputs of the same positions added one by one:
 * Q, D and M equal, and each picked logit the full policy's at its index. Then the misuse of
 * the picked calls, each refused with its status and nothing changed. */
static void picked(lc0rs_net net, const char *planes_path) {
    uint64_t *masks;
    float *values;
    size_t n = read_planes(planes_path, &masks, &values);
    CHECK(n >= 2);
    /* Position i is read at i + 1 indices: 0, 97, 194, ... and the last index first. */
    uint32_t *counts = malloc(n * sizeof *counts);
    uint16_t *indices = malloc(n * (n + 1) * sizeof *indices);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        counts[i] = (uint32_t)(i + 1);
        indices[total++] = LC0RS_POLICY_SIZE - 1;
        for (size_t k = 1; k <= i; k++) indices[total++] = (uint16_t)((k * 97) % LC0RS_POLICY_SIZE);
    }
    lc0rs_computation full = 0, c = 0;
    EXPECT(lc0rs_computation_create(net, &full), LC0RS_STATUS_OK, NULL);
    for (size_t i = 0; i < n; i++) {
        EXPECT(lc0rs_computation_add_planes(full, masks + i * LC0RS_INPUT_PLANES,
                                            values + i * LC0RS_INPUT_PLANES),
               LC0RS_STATUS_OK, NULL);
    }
    EXPECT(lc0rs_computation_add_picked(full, 1, masks, values, counts, indices),
           LC0RS_STATUS_STATE, "positions added one by one");
    EXPECT(lc0rs_computation_compute(full), LC0RS_STATUS_OK, NULL);

    EXPECT(lc0rs_computation_create(net, &c), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_add_picked(c, n, NULL, values, counts, indices),
           LC0RS_STATUS_NULL_POINTER, "masks");
    uint16_t bad = LC0RS_POLICY_SIZE;
    uint32_t one = 1;
    EXPECT(lc0rs_computation_add_picked(c, 1, masks, values, &one, &bad),
           LC0RS_STATUS_OUT_OF_RANGE, "policy index");
    size_t size = 99;
    EXPECT(lc0rs_computation_size(c, &size), LC0RS_STATUS_OK, NULL);
    CHECK(size == 0);
    /* Two calls: the first position, then the rest. */
    EXPECT(lc0rs_computation_add_picked(c, 1, masks, values, counts, indices), LC0RS_STATUS_OK,
           NULL);
    EXPECT(lc0rs_computation_add_picked(c, n - 1, masks + LC0RS_INPUT_PLANES,
                                        values + LC0RS_INPUT_PLANES, counts + 1, indices + 1),
           LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_add_planes(c, masks, values), LC0RS_STATUS_STATE,
           "added with lc0rs_computation_add_picked");
    float *q = malloc(n * sizeof *q), *d = malloc(n * sizeof *d), *m = malloc(n * sizeof *m);
    float *logits = malloc(total * sizeof *logits);
    EXPECT(lc0rs_computation_get_picked_outputs(c, n, q, d, m, logits, total),
           LC0RS_STATUS_STATE, "not computed yet");
    EXPECT(lc0rs_computation_compute(c), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_get_picked_outputs(c, n + 1, q, d, m, logits, total),
           LC0RS_STATUS_OUT_OF_RANGE, "expected");
    EXPECT(lc0rs_computation_get_picked_outputs(c, n, q, d, m, logits, total - 1),
           LC0RS_STATUS_OUT_OF_RANGE, "logits buffer");
    float unused;
    EXPECT(lc0rs_computation_get_q(c, 0, &unused), LC0RS_STATUS_STATE, "get_picked_outputs");
    EXPECT(lc0rs_computation_get_picked_outputs(c, n, q, d, m, logits, total), LC0RS_STATUS_OK,
           NULL);
    size_t at = 0;
    int agree = 1;
    for (size_t i = 0; i < n; i++) {
        float fq, fd, fm;
        EXPECT(lc0rs_computation_get_q(full, i, &fq), LC0RS_STATUS_OK, NULL);
        EXPECT(lc0rs_computation_get_d(full, i, &fd), LC0RS_STATUS_OK, NULL);
        EXPECT(lc0rs_computation_get_m(full, i, &fm), LC0RS_STATUS_OK, NULL);
        agree &= q[i] == fq && d[i] == fd && m[i] == fm;
        for (uint32_t k = 0; k < counts[i]; k++, at++) {
            float logit;
            EXPECT(lc0rs_computation_get_policy_logit(full, i, indices[at], &logit),
                   LC0RS_STATUS_OK, NULL);
            agree &= logits[at] == logit;
        }
    }
    CHECK(agree);
    CHECK(at == total);
    /* NULL outputs are skipped. */
    EXPECT(lc0rs_computation_get_picked_outputs(c, n, NULL, NULL, NULL, NULL, 0),
           LC0RS_STATUS_OK, NULL);
    /* Cleared, it takes positions of either kind again. */
    EXPECT(lc0rs_computation_clear(c), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_add_planes(c, masks, values), LC0RS_STATUS_OK, NULL);
    EXPECT(lc0rs_computation_free(c), LC0RS_STATUS_OK, NULL);
    compute_planes(net, n, masks, values, counts, indices, total, full);
    EXPECT(lc0rs_computation_free(full), LC0RS_STATUS_OK, NULL);
    free(q);
    free(d);
    free(m);
    free(logits);
    free(counts);
    free(indices);
    free(masks);
    free(values);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PLANES_FILE POSITIONS_FILE NET_FILE\n", argv[0]);
        return 2;
    }
    lc0rs_net net = 0;
    EXPECT(lc0rs_net_open("bundled:tiny", "cpu", "threads=1", &net), LC0RS_STATUS_OK, NULL);
    if (net == 0) die("open");
    lc0rs_net_info info;
    EXPECT(lc0rs_net_get_info(net, &info), LC0RS_STATUS_OK, NULL);

    lc0rs_computation c = 0;
    EXPECT(lc0rs_computation_create(net, &c), LC0RS_STATUS_OK, NULL);
    size_t n = add_inputs(c, argv[1], argv[2]);
    size_t planes_count = 0;
    {
        /* The planes come first: count them as the file has them. */
        FILE *f = fopen(argv[1], "r");
        int ch, last = '\n';
        while ((ch = fgetc(f)) != EOF) {
            if (ch == '\n' && last != '\n') planes_count++;
            last = ch;
        }
        fclose(f);
    }
    size_t size = 0;
    EXPECT(lc0rs_computation_size(c, &size), LC0RS_STATUS_OK, NULL);
    CHECK(size == n);
    EXPECT(lc0rs_computation_compute(c), LC0RS_STATUS_OK, NULL);
    print_outputs(c, n, planes_count);
    printf("info %d %d %d %zu %zu\n", info.input_format, info.has_wdl, info.has_moves_left,
           info.max_batch, info.recommended_batch);
    EXPECT(lc0rs_computation_free(c), LC0RS_STATUS_OK, NULL);

    misuse(net, planes_count);
    picked(net, argv[1]);
    from_memory(net, argv[1], argv[2], argv[3]);
    EXPECT(lc0rs_net_free(net), LC0RS_STATUS_OK, NULL);
    fprintf(stderr, "%d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
