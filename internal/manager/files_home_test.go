package manager

import "testing"

// TestRelativePathRules checks the two rules for a relative path: joined
// to the workdir (Corral's API), or passed on for the agent to resolve
// against the user's home (E2B's envd face), for files and an exec's cwd.
func TestRelativePathRules(t *testing.T) {
	for _, tc := range []struct {
		workdir, p        string
		fromHome          bool
		wantFile, wantCwd string
	}{
		{"/home/user", "a/b", false, "/home/user/a/b", "/home/user/a/b"},
		{"/home/user", "a/b", true, "a/b", "a/b"},
		{"/home/user", "../x", true, "../x", "../x"},
		{"/home/user", "/etc/x", true, "/etc/x", "/etc/x"},
		{"/home/user", "", true, "", "/home/user"}, // an empty cwd is the workdir either way
		{"", "a", false, "a", "a"},
	} {
		files := Files{}
		if tc.fromHome {
			files = files.FromHome()
		}
		if got := files.resolvePath(tc.workdir, tc.p); got != tc.wantFile {
			t.Errorf("file path %q (workdir %q, from home %v) = %q, want %q", tc.p, tc.workdir, tc.fromHome, got, tc.wantFile)
		}
		if got := execCwd(tc.workdir, ExecParams{Cwd: tc.p, CwdFromHome: tc.fromHome}); got != tc.wantCwd {
			t.Errorf("cwd %q (workdir %q, from home %v) = %q, want %q", tc.p, tc.workdir, tc.fromHome, got, tc.wantCwd)
		}
	}
}
