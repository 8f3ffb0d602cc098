package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
)

// TestTokens checks who may read and write under each configuration.
func TestTokens(t *testing.T) {
	t.Parallel()
	const create = `{"name": "Queue", "version": "v1", "schema": {"type": "object"}}`
	cases := []struct {
		name              string
		readTok, writeTok string
		// token sent, and the statuses of a read and of a write with it.
		checks []struct {
			token       string
			read, write int
		}
	}{
		{"default: open reads, no writes", "", "", []struct {
			token       string
			read, write int
		}{{"", 200, 403}, {"anything", 200, 403}}},
		{"write token only", "", writeToken, []struct {
			token       string
			read, write int
		}{{"", 200, 401}, {"wrong", 200, 401}, {writeToken, 200, 201}}},
		{"read and write tokens", readToken, writeToken, []struct {
			token       string
			read, write int
		}{{"", 401, 401}, {"wrong", 401, 401}, {readToken, 200, 403}, {writeToken, 200, 201}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(o *api.Options) { o.ReadToken, o.WriteToken = c.readTok, c.writeTok })
			for _, ch := range c.checks {
				if st, body, hdr := e.call("GET", "/api/v1/resources", ch.token, ""); st != ch.read {
					t.Errorf("read with %q = %d %s, want %d", ch.token, st, body, ch.read)
				} else if st == 401 && !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("401 without a Bearer challenge: %v", hdr)
				}
				if st, body, _ := e.call("POST", "/api/v1/resource-types", ch.token, create); st != ch.write {
					t.Errorf("write with %q = %d %s, want %d", ch.token, st, body, ch.write)
				}
			}
			// Health answers without a token whatever is configured.
			if st, _, _ := e.call("GET", "/healthz", "", ""); st != 200 {
				t.Errorf("healthz = %d", st)
			}
		})
	}
}

// TestBrowserLogin checks that the dashboard accepts the read token as a
// basic-auth password and challenges browsers for it.
func TestBrowserLogin(t *testing.T) {
	t.Parallel()
	dash := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "dashboard") })
	e := newEnv(t, func(o *api.Options) { o.ReadToken, o.Dashboard = readToken, dash })
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.http.URL+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
		t.Fatalf("dashboard without a token = %d %v, want 401 with a Basic challenge", resp.StatusCode, resp.Header)
	}
	for pass, want := range map[string]int{readToken: 200, "wrong": 401} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", e.http.URL+"/", nil)
		req.SetBasicAuth("anyone", pass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("basic auth with %q = %d, want %d", pass, resp.StatusCode, want)
		}
	}
}

// TestBrowserScriptLogin checks that requests the dashboard's scripts send
// (from the agent's own origin) are challenged for a basic-auth login, which
// a browser answers with the one it holds for the pages, while other
// clients of the API are asked for a bearer token.
func TestBrowserScriptLogin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *api.Options) { o.ReadToken = readToken })
	for _, tc := range []struct {
		method, path, site, want string
	}{
		{"GET", "/api/v1/events", "same-origin", "Basic"},
		{"POST", "/api/v1/sources/infra/sync", "same-origin", "Basic"},
		{"GET", "/api/v1/events", "", "Bearer"},
		{"POST", "/api/v1/sources/infra/sync", "", "Bearer"},
		{"GET", "/api/v1/events", "cross-site", "Bearer"},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), tc.method, e.http.URL+tc.path, nil)
		if tc.site != "" {
			req.Header.Set("Sec-Fetch-Site", tc.site)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 401 || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s %s from %q without a token = %d %q, want 401 with a %s challenge", tc.method, tc.path, tc.site, resp.StatusCode, got, tc.want)
		}
	}
}

// TestBodyLimit checks that oversized bodies are refused with 413 and
// write nothing.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *api.Options) { o.MaxBodyBytes = 4096 })
	e.must("POST", "/api/v1/resource-types", writeToken, dbType, 201, nil)
	big := fmt.Sprintf(`{"name": "big-pg", "resource_type_name": "DatabaseCluster", "spec": {"engine": "postgres", "storage_gb": 10, "pad": %q}}`,
		strings.Repeat("x", 5000))
	st, body, _ := e.call("POST", "/api/v1/resources", writeToken, big)
	if st != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "larger than 4096 bytes") {
		t.Fatalf("oversized body = %d %s, want 413", st, body)
	}
	if st, _, _ := e.call("GET", "/api/v1/resources/by-name/DatabaseCluster/v1/big-pg", "", ""); st != 404 {
		t.Errorf("the oversized resource was stored (%d)", st)
	}
	// The default limit follows the largest manifest file the agent reads
	// by default (1.5 MiB), with room for the JSON around it: a resource
	// nearly that large is taken, a body past the limit is not.
	if api.DefaultMaxBodyBytes != api.BodyLimit(manifest.DefaultMaxFileSize) || api.BodyLimit(3<<19) != 3<<19+64<<10 {
		t.Errorf("default body limit %d, want 1.5 MiB and 64 KiB", api.DefaultMaxBodyBytes)
	}
	e2 := newEnv(t, nil)
	e2.must("POST", "/api/v1/resource-types", writeToken, dbType, 201, nil)
	near := fmt.Sprintf(`{"name": "near-pg", "resource_type_name": "DatabaseCluster", "spec": {"engine": "postgres", "storage_gb": 10, "pad": %q}}`,
		strings.Repeat("x", manifest.DefaultMaxFileSize-1024))
	e2.must("POST", "/api/v1/resources", writeToken, near, 201, nil)
	huge := `{"name": "Huge", "version": "v1", "description": "` + strings.Repeat("y", api.DefaultMaxBodyBytes) + `"}`
	if st, _, _ := e2.call("POST", "/api/v1/resource-types", writeToken, huge); st != 413 {
		t.Errorf("a body over the default limit = %d, want 413", st)
	}
}

// TestPagination walks a list page by page with the Link header.
func TestPagination(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.must("POST", "/api/v1/resource-types", writeToken, dbType, 201, nil)
	for i := range 5 {
		e.must("POST", "/api/v1/resources", writeToken, fmt.Sprintf(
			`{"name": "pg-%d", "resource_type_name": "DatabaseCluster", "labels": {"team": "t%d"}, "spec": {"engine": "postgres", "storage_gb": 10}}`, i, i%2), 201, nil)
	}
	var names []string
	path := "/api/v1/resources?source=api&limit=2"
	for pages := 0; path != ""; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		var page []api.Resource
		st, body, hdr := e.call("GET", path, "", "")
		if st != 200 {
			t.Fatalf("GET %s = %d %s", path, st, body)
		}
		if err := jsonUnmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			names = append(names, r.Name)
		}
		path = ""
		if link := hdr.Get("Link"); link != "" {
			path = strings.TrimSuffix(strings.TrimPrefix(strings.Split(link, ";")[0], "<"), ">")
		}
	}
	if strings.Join(names, ",") != "pg-0,pg-1,pg-2,pg-3,pg-4" {
		t.Errorf("pages gave %v", names)
	}
	var team1 []api.Resource
	e.must("GET", "/api/v1/resources?label=team=t1", "", "", 200, &team1)
	if len(team1) != 2 || team1[0].Name != "pg-1" || team1[1].Name != "pg-3" {
		t.Errorf("label filter gave %+v", team1)
	}
}

// TestAllows checks what Allows tells the dashboard of a caller: what the
// endpoint of the write would check, grants limited to action instances and
// namespaces included, and nothing for a caller without a valid token, even
// where reads need none.
func TestAllows(t *testing.T) {
	t.Parallel()
	narrow := api.Token{Name: "narrow", Value: "narrow-secret", Grants: []api.Grant{
		{Verbs: []string{api.VerbGet, api.VerbList}},
		{Verbs: []string{api.VerbReconcile}, Actions: []string{"noop"}},
		{Verbs: []string{api.VerbSuspend}, Namespaces: []string{"team-a"}},
	}}
	var srv atomic.Pointer[api.Server]
	dash := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, c := range [][5]string{
			{api.VerbReconcile, "Network", "default", "infra", ""},
			{api.VerbReconcile, "Network", "default", "infra", "other"},
			{api.VerbSuspend, "Network", "team-a", "infra", ""},
			{api.VerbSuspend, "Network", "default", "infra", ""},
			{api.VerbSuspend, "", "", "infra", ""},
			{api.VerbSync, "", "", "infra", ""},
		} {
			fmt.Fprintf(w, "%t ", srv.Load().Allows(r, c[0], c[1], c[2], c[3], c[4]))
		}
	})
	e := newEnv(t, func(o *api.Options) { o.Tokens, o.Dashboard = []api.Token{narrow}, dash })
	srv.Store(e.srv)
	for token, want := range map[string]string{
		"narrow-secret": "true false true false false false ",
		writeToken:      "true true true true true true ",
	} {
		if st, body, _ := e.call("GET", "/", token, ""); st != 200 || string(body) != want {
			t.Errorf("Allows for %s = %d %q, want %q", token, st, body, want)
		}
	}
	open := newEnv(t, func(o *api.Options) { o.Dashboard = dash })
	srv.Store(open.srv)
	// Reads are open there: a token presented all the same is who the
	// caller is; a wrong one is no one, and reads as before.
	for token, want := range map[string]string{
		"":         "false false false false false false ",
		"wrong":    "false false false false false false ",
		writeToken: "true true true true true true ",
	} {
		if st, body, _ := open.call("GET", "/", token, ""); st != 200 || string(body) != want {
			t.Errorf("Allows with reads open and token %q = %d %q, want %q", token, st, body, want)
		}
	}
}
