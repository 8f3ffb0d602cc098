package manifest

import (
	"fmt"
	"strings"
	"testing"
)

// sizeBomb is a 42 KB file whose aliases stand for a 10 MiB spec: one
// 40 KiB string referenced 256 times. It has few nodes, so a budget of
// nodes alone lets it by.
func sizeBomb() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata:\n  name: bomb\nspec:\n")
	fmt.Fprintf(&b, "  a: &a %q\n", strings.Repeat("x", 40<<10))
	fmt.Fprintf(&b, "  b: [%s]\n", strings.TrimSuffix(strings.Repeat("*a,", 256), ","))
	return b.String()
}

func TestDecodeFileBoundsExpandedSize(t *testing.T) {
	t.Parallel()
	bomb := sizeBomb()
	if len(bomb) > 50<<10 {
		t.Fatalf("the bomb is %d bytes; it should be small", len(bomb))
	}
	big := strings.Repeat("y", 900<<10)
	tests := []struct {
		name    string
		data    string
		opts    DecodeOptions
		wantErr string // empty: decodes
	}{
		{"10 MiB from 42 KB", bomb, DecodeOptions{}, "bomb.yaml:1: document expands to more than 1572864 bytes through YAML aliases"},
		{"tighter limit", "a: &a " + strings.Repeat("z", 600) + "\nb: [*a, *a]\n", DecodeOptions{MaxExpandedSize: 1000},
			"bomb.yaml:1: document expands to more than 1000 bytes"},
		{"within the limit", "a: &a " + strings.Repeat("z", 600) + "\nb: [*a]\n", DecodeOptions{MaxExpandedSize: 2000}, ""},
		{"a large file as written", "a: " + big + "\n", DecodeOptions{MaxExpandedSize: 1000}, ""},
		{"merge keys count", "a: &a {k: " + strings.Repeat("m", 600) + "}\nb: {<<: *a}\n", DecodeOptions{MaxExpandedSize: 1000},
			"document expands to more than 1000 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			docs, ps := DecodeFile("bomb.yaml", []byte(tt.data), tt.opts)
			if tt.wantErr == "" {
				if len(ps) > 0 || len(docs) != 1 {
					t.Fatalf("docs %d, problems %v", len(docs), ps)
				}
				return
			}
			if len(docs) != 0 || len(ps) != 1 || !strings.Contains(ps[0].String(), tt.wantErr) {
				t.Fatalf("docs %d, problems %v; want one saying %q", len(docs), ps, tt.wantErr)
			}
		})
	}
}

func TestDecodeFileKeepsLargeIntegersExact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, value, want string
	}{
		{"2^64", "18446744073709551616", "18446744073709551616"},
		{"-2^64", "-18446744073709551616", "-18446744073709551616"},
		{"2^53+1", "9007199254740993", "9007199254740993"},
		{"exponent", "1e29", "100000000000000000000000000000"},
		{"exponent with fraction", "1.5e30", "1500000000000000000000000000000"},
		{"integral float notation", "18446744073709551617.0", "18446744073709551617"},
		{"JSON syntax", `{"n": 123456789012345678901234567890}`, "123456789012345678901234567890"},
		{"small stays", "3.0", "3"},
		{"fractions stay floats", "0.25", "0.25"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := "n: " + tt.value
			if strings.HasPrefix(tt.value, "{") {
				data = tt.value
			}
			docs, ps := DecodeFile("n.yaml", []byte(data), DecodeOptions{})
			if len(ps) > 0 || len(docs) != 1 {
				t.Fatalf("docs %d, problems %v", len(docs), ps)
			}
			got, err := CanonicalJSON(docs[0].Object)
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"n":` + tt.want + `}`; string(got) != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}

func TestDecodeFileRefusesNonFiniteNumbers(t *testing.T) {
	t.Parallel()
	// (1e400 and longer digit strings are strings in YAML, not numbers.)
	for _, v := range []string{".inf", "-.inf", ".nan"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			_, ps := DecodeFile("n.yaml", []byte("spec:\n  n: "+v+"\n"), DecodeOptions{})
			if len(ps) != 1 || !strings.Contains(ps[0].String(), "n.yaml:2: spec.n: ") {
				t.Fatalf("want one problem at n.yaml:2 naming spec.n, got %v", ps)
			}
		})
	}
}

func TestCanonicalizeJSONKeepsLargeIntegersExact(t *testing.T) {
	t.Parallel()
	got, err := CanonicalizeJSON([]byte(`{"a": 18446744073709551616, "b": 1e29, "c": 2.5}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":18446744073709551616,"b":100000000000000000000000000000,"c":2.5}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestValidateLargeIntegersKeepTheirDigits(t *testing.T) {
	t.Parallel()
	typ := strings.Replace(dbType, "storage_gb: {type: integer, minimum: 10}",
		"storage_gb: {type: integer, minimum: 10, maximum: 18446744073709551616}", 1)
	hashOf := func(storage string) (*Resource, []Problem) {
		set, ps := validateYAML(t, map[string]string{"t.yaml": typ,
			"r.yaml": dbResource("db", "  engine: postgres\n  storage_gb: "+storage+"\n")}, nil)
		if len(ps) > 0 {
			return nil, ps
		}
		return set.Resources[0], nil
	}
	exact, ps := hashOf("18446744073709551616")
	if ps != nil {
		t.Fatal(ps)
	}
	if !strings.Contains(string(exact.Spec), `"storage_gb":18446744073709551616`) {
		t.Errorf("stored spec lost digits: %s", exact.Spec)
	}
	// 2^64+1 rounds to 2^64 in float64: it must neither pass the maximum
	// nor hash like 2^64.
	if _, ps := hashOf("18446744073709551617"); len(ps) == 0 || !strings.Contains(ps[0].Message, "spec.storage_gb") {
		t.Errorf("2^64+1 passed maximum 2^64: %v", ps)
	}
	written, ps := hashOf("1.8446744073709551616e19")
	if ps != nil {
		t.Fatal(ps)
	}
	if written.SpecHash != exact.SpecHash {
		t.Errorf("the same integer written two ways hashes differently: %s %s", written.Spec, exact.Spec)
	}
	// A value that is not an integer is refused by type: integer.
	if _, ps := hashOf("18446744073709551616.5"); len(ps) == 0 {
		t.Error("18446744073709551616.5 accepted as an integer")
	}
}

func TestProblemStringEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{File: "a.yaml", Line: 3, Message: "spec.x: bad"}, "a.yaml:3: spec.x: bad"},
		{Problem{File: "a\nb.yaml", Line: 3, Message: "spec.x: bad"}, `"a\nb.yaml":3: spec.x: bad`},
		{Problem{File: "x\x1b[31m.yaml", Message: "m"}, `"x\x1b[31m.yaml": m`},
		{Problem{File: "r\u202eay.yaml", Message: "m"}, `"r\u202eay.yaml": m`},
		{Problem{File: "f.yaml", Message: "key \"a\nb\" twice\r\nOK"}, `f.yaml: key "a\nb" twice\r\nOK`},
		{Problem{File: "bad\xffbyte.yaml", Message: "m"}, `"bad\xffbyte.yaml": m`},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("String() = %s, want %s", got, tt.want)
		}
	}
}

func TestValidateMessagesQuoteOtherFiles(t *testing.T) {
	t.Parallel()
	_, ps := validateYAML(t, map[string]string{"t.yaml": dbType,
		"a\nforged.yaml": dbResource("db", "  engine: postgres\n  storage_gb: 20\n"),
		"b.yaml":         dbResource("db", "  engine: postgres\n  storage_gb: 20\n")}, nil)
	if len(ps) == 0 {
		t.Fatal("duplicate accepted")
	}
	for _, p := range ps {
		if s := p.String(); strings.ContainsAny(s, "\n\r") {
			t.Errorf("problem %q spans lines", s)
		}
	}
}
