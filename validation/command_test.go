package validation

import (
	"strings"
	"testing"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		body, slug string
		ok         bool
		want       Command
	}{
		{"/gilf rerun", "", true, Command{Name: CommandRerun, Word: "rerun"}},
		{"  /GILF Review\nplease", "", true, Command{Name: CommandReview, Word: "Review"}},
		{"@gilf-review explain test", "gilf-review", true, Command{Name: CommandExplain, Word: "explain", Arg: "test"}},
		{"@Gilf-Review explain  unit tests ", "gilf-review", true, Command{Name: CommandExplain, Word: "explain", Arg: "unit tests"}},
		{"@gilf-review rerun", "", false, Command{}},
		{"@someone-else rerun", "gilf-review", false, Command{}},
		{"/gilf", "", true, Command{Name: CommandHelp, Word: "help"}},
		{"/gilf dance", "", true, Command{Name: CommandUnknown, Word: "dance"}},
		{"/gilfrerun", "", false, Command{}},
		{"please /gilf rerun", "", false, Command{}},
		{"LGTM\n/gilf rerun", "", false, Command{}},
		{"", "", false, Command{}},
		{"/gilf explain " + strings.Repeat("x", MaxCommandLineBytes-14), "", true, Command{Name: CommandExplain, Word: "explain", Arg: strings.Repeat("x", MaxCommandLineBytes-14)}},
		{"/gilf explain " + strings.Repeat("x", MaxCommandLineBytes-13), "", false, Command{}},
	}
	for _, tt := range tests {
		got, ok := ParseCommand(tt.body, tt.slug)
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseCommand(%q, %q) = %+v, %v; want %+v, %v", tt.body, tt.slug, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzParseCommand: any comment body parses without panicking; what it
// accepts is one known command from the first line, bounded.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{"/gilf rerun", "@gilf-review explain test\nmore", "/gilf", "  /GILF  dance  ", "\n\n/gilf help", "/gilf explain \x00\u202e"} {
		f.Add(s, "gilf-review")
	}
	f.Fuzz(func(t *testing.T, body, slug string) {
		c, ok := ParseCommand(body, slug)
		if !ok {
			if c != (Command{}) {
				t.Fatalf("not a command but %+v", c)
			}
			return
		}
		switch c.Name {
		case CommandRerun, CommandReview, CommandExplain, CommandHelp, CommandUnknown:
		default:
			t.Fatalf("name %q", c.Name)
		}
		if strings.ContainsAny(c.Arg+c.Word, "\n") || len(c.Arg)+len(c.Word) > MaxCommandLineBytes {
			t.Fatalf("command %+v from %q", c, body)
		}
	})
}
