/* docs/driver-facts.md, "Cross-context behaviour": how often `cuStreamSynchronize` on a
 * stream of a destroyed context crashes. docs/c/destroyed_context.c shows the step once;
 * this program runs the same step (a context, a stream and 1 KiB of memory; destroy the
 * context; create another; synchronize the first context's stream) RUNS times, each in a
 * child process of its own (this program started again with `--child`), and counts how
 * each child ended. The parent makes no CUDA call.
 *
 *   nvcc -o /tmp/destroyed_stream_repeated docs/c/facts/destroyed_stream_repeated.c -lcuda
 *   /tmp/destroyed_stream_repeated
 *
 * docs/c/run.sh builds and runs it with the programs of docs/c/;
 * docs/c/facts/destroyed_stream_repeated.out is what it printed on the GPU machine. */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUNS 25

static const char *err_name(CUresult r) {
    const char *s = NULL;
    return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "(unknown CUresult)";
}

/* A call the step needs: the end of the child (exit 2) if it fails. */
#define MUST(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { \
    printf("%s -> %s\n", #call, err_name(r_)); exit(2); } } while (0)

/* cuCtxCreate took a parameter block from CUDA 13 on. */
static CUresult create_context(CUcontext *ctx, CUdevice dev) {
#if CUDA_VERSION >= 13000
    return cuCtxCreate(ctx, NULL, 0, dev);
#else
    return cuCtxCreate(ctx, 0, dev);
#endif
}

/* The step of destroyed_context.c, printing only the result of the synchronize. */
static int child(void) {
    CUdevice dev;
    CUcontext ctx, other;
    CUstream stream;
    CUdeviceptr buffer;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(create_context(&ctx, dev));
    MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&buffer, 1024));
    MUST(cuCtxDestroy(ctx));
    MUST(create_context(&other, dev));
    printf("cuStreamSynchronize(stream) -> %s\n", err_name(cuStreamSynchronize(stream)));
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 1 && strcmp(argv[1], "--child") == 0) return child();
    int crashed = 0, returned = 0, other = 0;
    printf("cuStreamSynchronize on a stream of a destroyed context, %d times, each in a child process:\n", RUNS);
    for (int i = 1; i <= RUNS; i++) {
        printf("  run %2d: ", i);
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], "--child", (char *)NULL);
            perror("execl");
            _exit(127);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFSIGNALED(status)) {
            printf("killed by signal %d (%s)\n", WTERMSIG(status), strsignal(WTERMSIG(status)));
            crashed++;
        } else if (WEXITSTATUS(status) == 0) {
            returned++;
        } else {
            printf("  (the child exited with status %d)\n", WEXITSTATUS(status));
            other++;
        }
    }
    printf("=> killed by a signal in %d of %d runs; the call returned in %d; other exits: %d\n",
           crashed, RUNS, returned, other);
    return 0;
}
