/* Chapter 2 of docs/guide/02-context-lifetime.md (rule 1): why nothing of a context may outlive it.
 *
 * Create a context, a stream and some memory, destroy the context, create another one
 * (so that some context is current, as in a program that goes on), then use the first
 * context's stream or memory. Each step runs in a child process of its own (this program started
 * again with the step's name), so that a crash ends only that step and the parent can
 * report it. The parent makes no CUDA call.
 *
 *   nvcc -o /tmp/destroyed_context docs/c/destroyed_context.c -lcuda && /tmp/destroyed_context
 *
 * docs/c/run.sh builds and runs every program here; destroyed_context.out is what this
 * one printed on the GPU machine. */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *err_name(CUresult r) {
    const char *s = NULL;
    return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "(unknown CUresult)";
}

/* Prints a driver call and its result. */
static CUresult show(const char *call, CUresult r) {
    printf("  %s -> %s\n", call, err_name(r));
    return r;
}
#define CALL(call) show(#call, (call))
/* A call the demonstration needs: printed, and the end of the program if it fails. */
#define MUST(call) do { if (show(#call, (call)) != CUDA_SUCCESS) exit(2); } while (0)

/* cuCtxCreate took a parameter block from CUDA 13 on. */
static CUresult create_context(CUcontext *ctx, CUdevice dev) {
#if CUDA_VERSION >= 13000
    return cuCtxCreate(ctx, NULL, 0, dev);
#else
    return cuCtxCreate(ctx, 0, dev);
#endif
}

static const char *steps[] = {"copy", "free", "stream-synchronize", NULL};

static int run_step(const char *step) {
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
    printf("The context is destroyed; its stream and memory handles are still in variables.\n");
    printf("The program goes on in another context, which is now current:\n");
    MUST(create_context(&other, dev));
    if (strcmp(step, "copy") == 0) {
        unsigned int data[4] = {1, 2, 3, 4};
        CALL(cuMemcpyHtoD(buffer, data, sizeof data));
    } else if (strcmp(step, "free") == 0) {
        CALL(cuMemFree(buffer));
    } else if (strcmp(step, "stream-synchronize") == 0) {
        printf("  cuStreamSynchronize(stream) ...\n");
        CALL(cuStreamSynchronize(stream));
    }
    printf("  (the step returned normally)\n");
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 1) return run_step(argv[1]);
    for (int i = 0; steps[i] != NULL; i++) {
        printf("--- step %s, in a child process\n", steps[i]);
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], steps[i], (char *)NULL);
            perror("execl");
            _exit(127);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFSIGNALED(status))
            printf("  => the child was killed by signal %d (%s)\n", WTERMSIG(status), strsignal(WTERMSIG(status)));
        else
            printf("  => the child exited with status %d\n", WEXITSTATUS(status));
    }
    return 0;
}
