/* test_options.c — options defaults, validation, copying of strings, the two-call idiom. */
#include <string.h>

#include "check.h"

/* get: reads key into a static buffer (sized by a first call) and returns it. */
static const char* get(CudaEpOptions o, const char* key) {
    static char buf[128];
    size_t needed = 0;
    if (!CHECK_OK(CudaEpGetOption(o, key, NULL, 0, &needed))) return "(error)";
    CHECK(needed >= 1 && needed <= sizeof buf);
    size_t again = 0;
    if (!CHECK_OK(CudaEpGetOption(o, key, buf, needed, &again))) return "(error)";
    CHECK(again == needed);
    CHECK(strlen(buf) + 1 == needed);
    return buf;
}

static void test_defaults(void) {
    CudaEpOptions o = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateOptions(&o));
    CHECK(o != CUDAEP_NULL_HANDLE);
    CHECK_STR(get(o, "backend"), "cuda");
    CHECK_STR(get(o, "device_id"), "0");
    CHECK_STR(get(o, "tf32"), "false");
    CHECK_STR(get(o, "staging_pool_cap_bytes"), "536870912");
    CHECK_STR(get(o, "residency_budget_bytes"), "0");
    CHECK_STR(get(o, "prefill_double_buffer"), "false");
    CHECK_STR(get(o, "wait_mode"), "auto");
    CHECK_STR(get(o, "paging_path"), "auto");
    CHECK_STR(get(o, "register_cap_bytes"), "0");
    CHECK_STR(get(o, "residency_slot_bytes"), "0");
    CHECK_OK(CudaEpReleaseOptions(o));
}

static void test_valid_values_read_back_canonically(void) {
    static const struct {
        const char *key, *value, *canonical;
    } cases[] = {
        {"backend", "sim", "sim"},
        {"backend", "auto", "auto"},
        {"device_id", "3", "3"},
        {"tf32", "1", "true"},
        {"tf32", "false", "false"},
        {"staging_pool_cap_bytes", "256MiB", "268435456"},
        {"residency_budget_bytes", "3GiB", "3221225472"},
        {"prefill_double_buffer", "true", "true"},
        {"wait_mode", "spin", "spin"},
        {"wait_mode", "block", "block"},
        {"wait_mode", "auto", "auto"},
        {"paging_path", "zero_copy", "zero_copy"},
        {"paging_path", "staging", "staging"},
        {"register_cap_bytes", "16GiB", "17179869184"},
        {"residency_slot_bytes", "64MiB", "67108864"},
    };
    CudaEpOptions o = new_sim_options();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_OK(CudaEpSetOption(o, cases[i].key, cases[i].value));
        CHECK_STR(get(o, cases[i].key), cases[i].canonical);
    }
    CHECK_OK(CudaEpReleaseOptions(o));
}

static void test_invalid_values_name_key_and_allowed(void) {
    static const struct {
        const char *key, *value, *allowed;
    } cases[] = {
        {"backend", "gpu", "cuda, sim or auto"},
        {"backend", "", "cuda, sim or auto"},
        {"device_id", "-1", "0..2147483647"},
        {"device_id", "zero", "0..2147483647"},
        {"tf32", "yes", "true, false, 1 or 0"},
        {"staging_pool_cap_bytes", "0", "greater than 0"},
        {"residency_budget_bytes", "12MB", "KiB, MiB, GiB or TiB"},
        {"prefill_double_buffer", "on", "true, false, 1 or 0"},
        {"wait_mode", "poll", "spin, block or auto"},
        {"wait_mode", "", "spin, block or auto"},
        {"paging_path", "zero-copy", "auto, zero_copy or staging"},
        {"register_cap_bytes", "1.5GiB", "KiB, MiB, GiB or TiB"},
        {"residency_slot_bytes", "-1", "KiB, MiB, GiB or TiB"},
    };
    CudaEpOptions o = new_sim_options();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char before[128];
        strcpy(before, get(o, cases[i].key));
        CudaEpStatus* st = CudaEpSetOption(o, cases[i].key, cases[i].value);
        CHECK(CudaEpGetErrorCode(st) == CUDAEP_INVALID_ARGUMENT);
        CHECK_CONTAINS(CudaEpGetErrorMessage(st), cases[i].key);
        CHECK_CONTAINS(CudaEpGetErrorMessage(st), cases[i].allowed);
        CudaEpReleaseStatus(st);
        CHECK_STR(get(o, cases[i].key), before); /* a rejected value changes nothing */
    }
    CHECK_OK(CudaEpReleaseOptions(o));
}

static void test_unknown_key_lists_known_keys(void) {
    CudaEpOptions o = new_sim_options();
    CudaEpStatus* st = CudaEpSetOption(o, "devcie_id", "0");
    CHECK(CudaEpGetErrorCode(st) == CUDAEP_INVALID_ARGUMENT);
    const char* msg = CudaEpGetErrorMessage(st);
    CHECK_CONTAINS(msg, "unknown option");
    CHECK_CONTAINS(msg, "devcie_id");
    const char* keys[] = {"backend", "device_id", "tf32", "staging_pool_cap_bytes",
                          "residency_budget_bytes", "prefill_double_buffer", "wait_mode",
                          "paging_path", "register_cap_bytes", "residency_slot_bytes"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) CHECK_CONTAINS(msg, keys[i]);
    CudaEpReleaseStatus(st);

    size_t needed = 0;
    CHECK_ERR(CudaEpGetOption(o, "nope", NULL, 0, &needed), CUDAEP_INVALID_ARGUMENT, "unknown option");
    CHECK_ERR(CudaEpSetOption(o, NULL, "1"), CUDAEP_INVALID_ARGUMENT, "key is NULL");
    CHECK_ERR(CudaEpSetOption(o, "tf32", NULL), CUDAEP_INVALID_ARGUMENT, "value is NULL");
    CHECK_ERR(CudaEpGetOption(o, NULL, NULL, 0, &needed), CUDAEP_INVALID_ARGUMENT, "key is NULL");
    CHECK_OK(CudaEpReleaseOptions(o));
}

static void test_strings_are_copied_in(void) {
    CudaEpOptions o = new_sim_options();
    char key[32], value[32];
    strcpy(key, "device_id");
    strcpy(value, "5");
    CHECK_OK(CudaEpSetOption(o, key, value));
    strcpy(key, "tf32");
    strcpy(value, "9");
    CHECK_STR(get(o, "device_id"), "5");
    CHECK_OK(CudaEpReleaseOptions(o));
}

static void test_two_call_idiom(void) {
    CudaEpOptions o = new_sim_options();
    size_t needed = 0;
    CHECK_OK(CudaEpGetOption(o, "backend", NULL, 0, &needed));
    CHECK(needed == 4); /* "sim" and its NUL */

    char buf[8];
    memset(buf, 0x5A, sizeof buf);
    size_t got = 777;
    CHECK_ERR(CudaEpGetOption(o, "backend", buf, needed - 1, &got), CUDAEP_INVALID_ARGUMENT,
              "4 bytes needed");
    CHECK(got == 777);                         /* out-parameters untouched on error */
    CHECK((unsigned char)buf[0] == 0x5A);      /* and the short buffer too: no truncation */
    CHECK_ERR(CudaEpGetOption(o, "backend", NULL, 8, &got), CUDAEP_INVALID_ARGUMENT, "buf is NULL");
    CHECK_ERR(CudaEpGetOption(o, "backend", buf, sizeof buf, NULL), CUDAEP_INVALID_ARGUMENT,
              "out_needed is NULL");

    CHECK_OK(CudaEpGetOption(o, "backend", buf, needed, &got)); /* exactly enough */
    CHECK(got == 4);
    CHECK(memcmp(buf, "sim", 4) == 0);
    CHECK((unsigned char)buf[4] == 0x5A); /* nothing past the NUL is written */
    CHECK_OK(CudaEpReleaseOptions(o));
}

int main(void) {
    test_defaults();
    test_valid_values_read_back_canonically();
    test_invalid_values_name_key_and_allowed();
    test_unknown_key_lists_known_keys();
    test_strings_are_copied_in();
    test_two_call_idiom();
    check_no_live_handles();
    return check_result("test_options");
}
