package codepages

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"testing"
)

func TestReadOnlyMappings(t *testing.T) {
	t.Parallel()
	const exe = "/usr/local/bin/no8s-agent"
	maps := `00400000-01a13000 r-xp 00000000 fe:00 10687410                           /usr/local/bin/no8s-agent
01a13000-032a4000 r--p 01613000 fe:00 10687410                           /usr/local/bin/no8s-agent
032a4000-0339a000 rw-p 02ea4000 fe:00 10687410                           /usr/local/bin/no8s-agent
0339a000-033c0000 rw-p 00000000 00:00 0
c000000000-c004000000 rw-p 00000000 00:00 0
7f0000000000-7f0000028000 r--p 00000000 fe:00 123                        /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000028000-7f000019d000 r-xp 00028000 fe:00 123                        /usr/lib/x86_64-linux-gnu/libc.so.6
7f1000000000-7f1000001000 r-xp 00000000 fe:00 99                         /usr/local/bin/no8s-agent (deleted)
7f2000000000-7f2000001000 rwxp 00000000 fe:00 10687410                   /usr/local/bin/no8s-agent
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
`
	got, err := readOnlyMappings([]byte(maps), exe)
	if err != nil {
		t.Fatal(err)
	}
	want := []mapping{{0x400000, 0x1a13000}, {0x1a13000, 0x32a4000}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want the code and read-only data only: %#v", got, want)
	}
	if _, err := readOnlyMappings([]byte("zz-yy r-xp 0 0 0 "+exe+"\n"), exe); err == nil {
		t.Fatal("a range that is not hexadecimal was taken")
	}
}

// TestReleaseDropsCodeAndKeepsRunning releases this test's own program and
// checks that its resident file pages went down, that its writable data
// kept its value, and that its code still runs.
func TestReleaseDropsCodeAndKeepsRunning(t *testing.T) {
	marker = "written at run time"
	// Touch a good deal of code first.
	b, err := json.Marshal(map[string]any{"a": []int{1, 2, 3}, "b": map[string]string{"c": "d"}})
	if err != nil {
		t.Fatal(err)
	}
	before := rssFile(t)
	rel, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	if rel.Mappings < 2 || rel.Bytes == 0 {
		t.Fatalf("released %+v: want the code and the read-only data", rel)
	}
	if after >= before {
		t.Fatalf("resident file pages %d kB before, %d kB after", before, after)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil || back["b"].(map[string]any)["c"] != "d" {
		t.Fatalf("code after the release: %v %v", back, err)
	}
	if marker != "written at run time" {
		t.Fatalf("writable data lost: %q", marker)
	}
	t.Logf("released %d mappings (%d MB); resident file pages %d kB -> %d kB", rel.Mappings, rel.Bytes>>20, before, after)
}

// marker is writable data the release must not touch.
var marker = "as linked"

var rssFileLine = regexp.MustCompile(`(?m)^RssFile:\s+(\d+) kB`)

func rssFile(t *testing.T) int {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	m := rssFileLine.FindSubmatch(status)
	if m == nil {
		t.Fatal("no RssFile in /proc/self/status")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
