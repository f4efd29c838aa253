#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpu.h"
#include "util.h"

// Captured from `nvidia-smi --query-gpu=index,name,memory.total
// --format=csv,noheader,nounits` on a 2-GPU host.
static const char *s_smi_two =
    "0, NVIDIA H100 80GB HBM3, 81559\n"
    "1, NVIDIA A100-SXM4-40GB, 40960\n";

static const char *s_smi_output = NULL; // what the fake nvidia-smi prints; NULL: fails

static char *
s_fake_smi (void)
{
    return s_smi_output ? cgq_xstrdup (s_smi_output) : NULL;
}

static void
test_parse_smi (void **state)
{
    cgq_gpu_list_t list;
    cgq_gpu_list_init (&list);
    assert_int_equal (cgq_gpu_parse_smi (s_smi_two, &list), 2);
    assert_int_equal (list.count, 2);
    assert_int_equal (list.items[0].index, 0);
    assert_string_equal (list.items[0].name, "NVIDIA H100 80GB HBM3");
    assert_int_equal (list.items[0].memory, 81559ull << 20);
    assert_int_equal (list.items[1].index, 1);
    assert_string_equal (list.items[1].name, "NVIDIA A100-SXM4-40GB");
    assert_int_equal (list.items[1].memory, 40960ull << 20);
    cgq_gpu_list_fini (&list);
    assert_null (list.items);
}

static void
test_parse_smi_odd (void **state)
{
    cgq_gpu_list_t list;
    cgq_gpu_list_init (&list);
    // A name with a comma, unknown memory, CRLF, blank lines.
    assert_int_equal (cgq_gpu_parse_smi ("\n3, Tesla, the good one, [N/A]\r\n\n", &list), 1);
    assert_int_equal (list.items[0].index, 3);
    assert_string_equal (list.items[0].name, "Tesla, the good one");
    assert_int_equal (list.items[0].memory, 0);
    cgq_gpu_list_fini (&list);

    cgq_gpu_list_init (&list);
    assert_int_equal (cgq_gpu_parse_smi ("", &list), 0);
    assert_int_equal (cgq_gpu_parse_smi ("No devices were found\n", &list), -1);
    assert_int_equal (cgq_gpu_parse_smi ("x, name, 100\n", &list), -1);
    assert_int_equal (list.count, 0);
    cgq_gpu_list_fini (&list);
}

static void
test_discover_specs (void **state)
{
    char err[256];
    cgq_gpu_list_t list;
    char *(*saved) (void) = cgq_gpu_smi_run;
    cgq_gpu_smi_run = s_fake_smi;
    s_smi_output = NULL;

    cgq_gpu_list_init (&list);
    assert_int_equal (cgq_gpu_discover ("none", &list, err, sizeof err), 0);
    assert_int_equal (list.count, 0);
    assert_int_equal (cgq_gpu_discover (NULL, &list, err, sizeof err), 0);
    assert_int_equal (list.count, 0);

    assert_int_equal (cgq_gpu_discover ("fake:3", &list, err, sizeof err), 0);
    assert_int_equal (list.count, 3);
    assert_string_equal (list.items[2].name, "fake-gpu-2");
    assert_int_equal (list.items[2].index, 2);
    assert_int_equal (list.items[2].memory, 16ull << 30);
    cgq_gpu_list_fini (&list);

    cgq_gpu_list_init (&list);
    assert_int_equal (cgq_gpu_discover ("fake:0", &list, err, sizeof err), 0);
    assert_int_equal (list.count, 0);

    assert_int_equal (cgq_gpu_discover ("0, 2", &list, err, sizeof err), 0);
    assert_int_equal (list.count, 2);
    assert_int_equal (list.items[0].index, 0);
    assert_int_equal (list.items[1].index, 2);
    assert_string_equal (list.items[1].name, "gpu-2");
    cgq_gpu_list_fini (&list);

    const char *bad[] = {"fake:", "fake:x", "fake:-1", "0,x", "1,1", ",", "gpu0", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cgq_gpu_list_init (&list);
        err[0] = 0;
        assert_int_equal (cgq_gpu_discover (bad[i], &list, err, sizeof err), -1);
        assert_true (strlen (err) > 0);
        assert_int_equal (list.count, 0);
        cgq_gpu_list_fini (&list);
    }
    cgq_gpu_list_init (&list);
    cgq_gpu_discover ("0,x", &list, err, sizeof err);
    assert_non_null (strstr (err, "'x'"));
    cgq_gpu_list_fini (&list);
    cgq_gpu_smi_run = saved;
}

static void
test_discover_auto (void **state)
{
    char err[256];
    cgq_gpu_list_t list;
    char *(*saved) (void) = cgq_gpu_smi_run;
    cgq_gpu_smi_run = s_fake_smi;

    s_smi_output = s_smi_two;
    cgq_gpu_list_init (&list);
    assert_int_equal (cgq_gpu_discover ("auto", &list, err, sizeof err), 0);
    assert_int_equal (list.count, 2);
    assert_string_equal (list.items[1].name, "NVIDIA A100-SXM4-40GB");
    cgq_gpu_list_fini (&list);

    // Explicit indices take names and memory from nvidia-smi when it runs.
    cgq_gpu_list_init (&list);
    assert_int_equal (cgq_gpu_discover ("1", &list, err, sizeof err), 0);
    assert_int_equal (list.count, 1);
    assert_int_equal (list.items[0].index, 1);
    assert_string_equal (list.items[0].name, "NVIDIA A100-SXM4-40GB");
    assert_int_equal (list.items[0].memory, 40960ull << 20);
    cgq_gpu_list_fini (&list);

    // Missing binary / failure / garbage: no GPUs, not an error.
    s_smi_output = NULL;
    cgq_gpu_list_init (&list);
    assert_int_equal (cgq_gpu_discover ("auto", &list, err, sizeof err), 0);
    assert_int_equal (list.count, 0);
    s_smi_output = "Failed to initialize NVML: Driver/library version mismatch\n";
    assert_int_equal (cgq_gpu_discover ("auto", &list, err, sizeof err), 0);
    assert_int_equal (list.count, 0);
    cgq_gpu_list_fini (&list);

    cgq_gpu_smi_run = saved;
}

static void
test_discover_auto_real (void **state)
{
    // Whatever this host has, the real probe must not fail or leak.
    char err[256];
    cgq_gpu_list_t list;
    cgq_gpu_list_init (&list);
    assert_int_equal (cgq_gpu_discover ("auto", &list, err, sizeof err), 0);
    for (size_t i = 0; i < list.count; i++)
        assert_non_null (list.items[i].name);
    cgq_gpu_list_fini (&list);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_parse_smi),
        cmocka_unit_test (test_parse_smi_odd),
        cmocka_unit_test (test_discover_specs),
        cmocka_unit_test (test_discover_auto),
        cmocka_unit_test (test_discover_auto_real),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
