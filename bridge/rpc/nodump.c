/*
 * Preloaded into the agent (LD_PRELOAD, set by the bridge): before the agent's main()
 * runs, the process is made non-dumpable.
 *
 * Why: the agent's tools run as the agent's own user, and the kernel lets a process of
 * the same user open /proc/<pid>/fd/N, mem and environ of a dumpable process, ptrace
 * it and take its descriptors with pidfd_getfd. pi's stdin is where the answers to its
 * questions arrive, so a tool with that access could answer its own approval question
 * or forge the events pi writes to the bridge. A non-dumpable process lets only holders
 * of CAP_SYS_PTRACE in, and the agent's tools have no capability at all.
 *
 * No libc headers and no libc link (cc -shared -nostdlib): prctl is resolved from the
 * agent's own libc when the library is loaded, so a bare compiler is enough to build it.
 * See bridge/rpc/nodump.py.
 */
extern int prctl(int option, unsigned long arg2, unsigned long arg3, unsigned long arg4,
                 unsigned long arg5);

#define PR_SET_DUMPABLE 4

__attribute__((constructor)) static void pi_bridge_nodump(void) {
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}
