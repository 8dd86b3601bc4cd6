/*
 * test_xrt: what of the `xrt` backend runs without a card. Each XRT call
 * happens in a child process under alarm() (XRT's shims can abort the
 * process or hang), and the parent checks the error text the child sends
 * back:
 *  - XILINX_XRT unset: refused before any XRT call, naming XILINX_XRT;
 *  - XCL_EMULATION_MODE=sw_emu: refused (that shim hangs), naming sw_emu;
 *  - XILINX_XRT set, no board: xrtDeviceOpen fails and the error says no
 *    device could be opened;
 *  - XCL_EMULATION_MODE=hw_emu: XRT's hw_emu shim opens a device, and the
 *    backend gets as far as the missing xclbin, naming TESSERA_XCLBIN.
 * Loading an xclbin, buffer objects in a kernel's bank and runs need an
 * xclbin built with Vitis (and a card or hw_emu's simulator): not here.
 * Without libxrt-dev the backend is not built and the test checks that
 * asking for it says so.
 */
#define _DEFAULT_SOURCE /* mkdtemp, symlink */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tsr_error.h"
#include "tsr_testenv.h"

/* Open "xrt" in a child under a 60 s alarm; the child's error message (or
 * "OK") in msg. */
static void open_in_child(char *msg, size_t n)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        alarm(60);
        tsr_config_t cfg;
        tsr_device_t *dev = NULL;
        const char *m = "config";
        if (!tsr_test_config("tiny", &cfg))
            m = tsr_device_open("xrt", &cfg, NULL, &dev) ? tsr_errmsg() : "OK";
        if (write(fd[1], m, strlen(m)) < 0)
            _exit(3);
        _exit(0);
    }
    close(fd[1]);
    size_t len = 0;
    ssize_t r;
    while (len + 1 < n && (r = read(fd[0], msg + len, n - 1 - len)) > 0)
        len += (size_t)r;
    msg[len] = '\0';
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status))
        fail_msg("xrt open crashed or hung (signal %d); said: %s", WIFSIGNALED(status) ? WTERMSIG(status) : 0, msg);
    printf("  -> %s\n", msg);
}

static void test_xrt_without_board(void **st)
{
    (void)st;
    char msg[1024];
#ifndef TSR_HAVE_XRT
    tsr_config_t cfg;
    tsr_device_t *dev = NULL;
    assert_int_equal(tsr_test_config("tiny", &cfg), 0);
    assert_int_equal(tsr_device_open("xrt", &cfg, NULL, &dev), TSR_EBACKEND);
    assert_non_null(strstr(tsr_errmsg(), "libxrt-dev was not found"));
    (void)msg;
    skip();
#else
    unsetenv("XCL_EMULATION_MODE");
    unsetenv("XILINX_XRT");
    printf("XILINX_XRT unset:\n");
    open_in_child(msg, sizeof msg);
    assert_non_null(strstr(msg, "XILINX_XRT is not set"));

    /* XILINX_XRT: a directory whose lib/ is the system library directory. */
    char dir[] = "/tmp/tsr_xrt_XXXXXX", lib[64];
    assert_non_null(mkdtemp(dir));
    snprintf(lib, sizeof lib, "%s/lib", dir);
    assert_int_equal(symlink("/usr/lib/x86_64-linux-gnu", lib), 0);
    setenv("XILINX_XRT", dir, 1);

    setenv("XCL_EMULATION_MODE", "sw_emu", 1);
    printf("XCL_EMULATION_MODE=sw_emu:\n");
    open_in_child(msg, sizeof msg);
    assert_non_null(strstr(msg, "sw_emu is not supported"));

    unsetenv("XCL_EMULATION_MODE");
    printf("no board:\n");
    open_in_child(msg, sizeof msg);
    assert_non_null(strstr(msg, "xrt: cannot open device 0"));

    setenv("XCL_EMULATION_MODE", "hw_emu", 1);
    unsetenv("TESSERA_XCLBIN");
    printf("XCL_EMULATION_MODE=hw_emu, no xclbin:\n");
    open_in_child(msg, sizeof msg);
    assert_non_null(strstr(msg, "device 0 is open but TESSERA_XCLBIN (unset)"));
    unsetenv("XCL_EMULATION_MODE");
    unlink(lib);
    rmdir(dir);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_xrt_without_board)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
