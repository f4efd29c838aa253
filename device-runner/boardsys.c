#include "boardsys.h"

#include <inttypes.h>

#include "util.h"

// Twice: a min above the saved max (or the reverse) is refused by the
// kernel until the other one is back; the second round sets it.
#define S_RESTORE                                                                                  \
    "if [ -f cpufreq.saved ]; then for i in 1 2; do while read -r p v; do "                        \
    "echo \"$v\" > \"$p\" 2>/dev/null; done < cpufreq.saved; done; rm -f cpufreq.saved; "          \
    "echo " CGQ_BOARDSYS_RESTORED "; fi"

const char *
cgq_boardsys_restore_command (void)
{
    return S_RESTORE;
}

char *
cgq_boardsys_pin_command (const char *governor, uint64_t khz)
{
    char k[32] = "";
    if (khz)
        snprintf (k, sizeof k, "%" PRIu64, khz);
    return cgq_xasprintf (
        "G='%s'; K='%s'; R=${CGQ_SYSFS_ROOT:-/sys}; " S_RESTORE "; n=0; : > cpufreq.saved.part; "
        "for d in \"$R\"/devices/system/cpu/cpu[0-9]*/cpufreq; do "
        "[ -r \"$d/scaling_governor\" ] || continue; n=$((n+1)); "
        "for f in scaling_governor scaling_max_freq scaling_min_freq; do "
        "echo \"$d/$f $(cat \"$d/$f\")\" >> cpufreq.saved.part; done; "
        "if [ -n \"$G\" ] && [ -r \"$d/scaling_available_governors\" ] && "
        "! grep -qw \"$G\" \"$d/scaling_available_governors\"; then "
        "echo \"" CGQ_BOARDSYS_ERROR "the board's $d has no cpufreq governor '$G' (it offers: "
        "$(cat \"$d/scaling_available_governors\"))\"; rm -f cpufreq.saved.part; exit 3; fi; "
        "if [ -n \"$K\" ] && [ -r \"$d/cpuinfo_max_freq\" ] && [ -r \"$d/cpuinfo_min_freq\" ] && "
        "{ [ \"$K\" -gt \"$(cat \"$d/cpuinfo_max_freq\")\" ] || "
        "[ \"$K\" -lt \"$(cat \"$d/cpuinfo_min_freq\")\" ]; }; then "
        "echo \"" CGQ_BOARDSYS_ERROR "frequency $K kHz is outside the board's $d range "
        "$(cat \"$d/cpuinfo_min_freq\")..$(cat \"$d/cpuinfo_max_freq\") kHz\"; "
        "rm -f cpufreq.saved.part; exit 3; fi; "
        "done; "
        "if [ $n -eq 0 ]; then echo \"" CGQ_BOARDSYS_ERROR "governor/frequency pinning is not "
        "supported on this device: no cpufreq on the board ($R/devices/system/cpu/cpu*/cpufreq "
        "is absent; remove measure.governor and measure.frequency)\"; rm -f cpufreq.saved.part; "
        "exit 3; fi; "
        "mv cpufreq.saved.part cpufreq.saved; "
        "for d in \"$R\"/devices/system/cpu/cpu[0-9]*/cpufreq; do "
        "[ -r \"$d/scaling_governor\" ] || continue; ok=1; "
        "if [ -n \"$G\" ]; then echo \"$G\" > \"$d/scaling_governor\" || ok=0; fi; "
        "if [ -n \"$K\" ] && [ $ok -eq 1 ]; then "
        "if [ \"$K\" -gt \"$(cat \"$d/scaling_max_freq\")\" ]; then "
        "echo \"$K\" > \"$d/scaling_max_freq\" && echo \"$K\" > \"$d/scaling_min_freq\" || ok=0; "
        "else echo \"$K\" > \"$d/scaling_min_freq\" && echo \"$K\" > \"$d/scaling_max_freq\" || "
        "ok=0; fi; fi; "
        "if [ $ok -eq 0 ]; then echo \"" CGQ_BOARDSYS_ERROR "cannot write the board's $d "
        "(the transport's user needs write access to cpufreq)\"; " S_RESTORE " >/dev/null; "
        "exit 4; fi; done; true",
        governor ? governor : "", k);
}
