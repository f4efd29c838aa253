// boardsys: governor/frequency pinning and its restore on a board reached
// through a transport, as shell commands run there (POSIX sh, as busybox,
// toybox and Tizen's shells take it). The board's settings are saved to
// cpufreq.saved in the runner's directory on the board before they are
// changed; a pin command restores a save left by a killed measurement first.
// $CGQ_SYSFS_ROOT on the board (a device env) replaces /sys, for tests.
#ifndef CGQ_BOARDSYS_H
#define CGQ_BOARDSYS_H

#include <stdint.h>

// Lines the commands print: an error to refuse the measurement with, and
// that a killed measurement's settings were put back.
#define CGQ_BOARDSYS_ERROR "cgq-error "
#define CGQ_BOARDSYS_RESTORED "cgq-restored"

// cgq_boardsys_pin_command sets governor (NULL or "": unchanged; a name of
// [a-z0-9_] only) and pins every cpufreq CPU to khz (0: unchanged). Exit 0
// when pinned; 3 with a CGQ_BOARDSYS_ERROR line when the board cannot (no
// cpufreq, a governor it does not offer), nothing changed; 4 with one when
// a write failed, what was changed put back. Caller frees.
char *cgq_boardsys_pin_command (const char *governor, uint64_t khz);

// cgq_boardsys_restore_command writes back cpufreq.saved if there is one
// (printing CGQ_BOARDSYS_RESTORED) and removes it. Borrowed.
const char *cgq_boardsys_restore_command (void);

#endif
