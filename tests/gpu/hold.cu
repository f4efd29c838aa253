// hold: a stand-in for a trial's GPU-holding background child (a data loader
// or a CUDA context left behind): allocates MIB of device memory, touches it,
// writes "PID DEVICES BUSID" to FILE (its PID, how many CUDA devices it sees
// and the PCI bus id of the one it uses), then holds the memory for SECONDS.
//
//   hold MIB SECONDS FILE
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int
main (int argc, char **argv)
{
    if (argc != 4) {
        fprintf (stderr, "usage: hold MIB SECONDS PIDFILE\n");
        return 2;
    }
    size_t bytes = (size_t) atol (argv[1]) << 20;
    void *p = NULL;
    cudaError_t rc = cudaMalloc (&p, bytes);
    if (rc != cudaSuccess) {
        fprintf (stderr, "hold: cudaMalloc %s MiB: %s\n", argv[1], cudaGetErrorString (rc));
        return 1;
    }
    cudaMemset (p, 1, bytes);
    cudaDeviceSynchronize ();
    int count = 0, dev = 0;
    char bus[32] = "?";
    cudaGetDeviceCount (&count);
    cudaGetDevice (&dev);
    cudaDeviceGetPCIBusId (bus, sizeof bus, dev);
    FILE *f = fopen (argv[3], "w");
    if (f) {
        fprintf (f, "%d %d %s\n", (int) getpid (), count, bus);
        fclose (f);
    }
    sleep ((unsigned) atoi (argv[2]));
    cudaFree (p);
    return 0;
}
