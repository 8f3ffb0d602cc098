package dashboard

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// buttonTag matches an action button's opening tag.
var buttonTag = regexp.MustCompile(`<button type="button" class="action[^>]*>`)

// TestButtonsAskOnlyForWhatTheAPIRecords: the dialog says a reason is
// "recorded with the change". A suspension records it; a resume records
// nothing, so its button must not ask for one, which would be dropped
// while the person thinks it is on record.
func TestButtonsAskOnlyForWhatTheAPIRecords(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ls := newLiveServer(t, f.st, 0)
	pg := f.ids["production-pg"]
	page := fmt.Sprintf("/resources/%d", pg)
	for _, path := range []string{fmt.Sprintf("/api/v1/resources/%d/suspend", pg), "/api/v1/sources/" + sourceName + "/suspend"} {
		if code, body := ls.do(t, http.MethodPost, path, writeSecret, `{"reason":"disk swap"}`); code != http.StatusOK {
			t.Fatalf("POST %s: %d %s", path, code, body)
		}
	}
	for _, p := range []string{page, "/sources/" + sourceName} {
		code, body := ls.do(t, http.MethodGet, p, writeSecret, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", p, code)
		}
		if !strings.Contains(body, "disk swap") {
			t.Errorf("GET %s does not show the suspension's reason", p)
		}
		var resume string
		for _, tag := range buttonTag.FindAllString(body, -1) {
			if strings.Contains(tag, `/resume"`) {
				resume = tag
			}
		}
		if resume == "" {
			t.Fatalf("GET %s offers no resume:\n%s", p, body)
		}
		if strings.Contains(resume, "data-reason") {
			t.Errorf("GET %s: the resume button asks for a reason the API does not record: %s", p, resume)
		}
	}
}
