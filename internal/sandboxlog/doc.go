// Package sandboxlog is the one writer of everything a sandbox makes the
// host keep: its events, their audit entries, the audit entries of what
// callers do inside it (execs, files, API calls naming it), and the
// daemon's log lines that name it. Whatever the source (a network
// decision, a connection to an exposed port, a DNS query, an exec, a
// lifecycle move), a record goes through Writer, which charges it to the
// sandbox's one budget:
//
//   - Each sandbox has a token bucket of detailed records: Burst at once,
//     then Rate a second. A record past it is folded: counted, in its
//     window of Window, under its kind and a fold key (a decision's
//     verdict, protocol, destination and reason; an exec's caller and
//     program; a port connection's port), and each window with folds ends
//     in one limit_reached event (resource "trail") saying how many were
//     folded, of which kinds, and the top TopKeys keys by count. Nothing
//     is dropped: a record is either written or counted in a fold.
//   - Evidence is never folded away: a denied decision toward a protected
//     destination (policy.AlwaysDenied, the metadata addresses, the host's
//     own addresses and networks), and a limit_reached event of a bound
//     that refused the sandbox (reported once a second at most by its
//     source), is written in detail whatever the
//     bucket holds, up to EvidencePerWindow a window; past that its
//     destination is still named in the window's fold (up to
//     evidenceKeys of them, then a count).
//   - Milestones (a sandbox's state moves: running, paused, terminated...)
//     are written whatever the bucket holds and charged to it: the state
//     machine bounds them, and a trail without its sandbox's end is wrong.
//   - Every stored field is capped (capRecord): a value past MaxValue bytes
//     is cut, with its length and a hash kept beside it, so a 64 KiB path
//     costs what a short one does.
//   - Log lines that name a sandbox (a "sandbox" attribute) go through
//     LogBudget, a slog.Handler with a bucket of its own per sandbox; the
//     lines it holds back are counted and told in one line per window.
//
// Writing a sandbox's records any other way bypasses the budget: the
// records store's AppendEvent and the audit trail's Record are called for
// sandboxes only from here (test/deps checks it).
//
// The package imports the records store, the audit trail and the network
// policy contract; the manager, the daemon and the API faces use it.
package sandboxlog
