package mountinfo

import "testing"

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:         "/plain",
		`/a\040b`:        "/a b",
		`/tab\011x\012`:  "/tab\tx\n",
		`/back\134slash`: `/back\slash`,
		`/end\04`:        `/end\04`,
		`/bad\999`:       `/bad\999`,
		`\040`:           " ",
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
