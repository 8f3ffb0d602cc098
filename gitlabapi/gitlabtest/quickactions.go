package gitlabtest

import (
	"regexp"
	"strings"
)

// quickActionNames are the quick actions GitLab runs from a merge request's
// note (a selection; the harmless text substitutions are left out).
var quickActionNames = []string{
	"approve", "unapprove", "merge", "close", "reopen", "rebase", "submit_review",
	"label", "labels", "unlabel", "remove_label", "relabel", "assign", "unassign",
	"assign_reviewer", "reviewer", "request_review", "unassign_reviewer", "remove_reviewer",
	"title", "draft", "ready", "wip", "milestone", "remove_milestone", "target_branch",
	"copy_metadata", "lock", "unlock", "subscribe", "unsubscribe", "todo", "done",
	"estimate", "spend", "award", "react", "due", "remove_due_date", "weight", "cc",
}

// quickActions is GitLab's Gitlab::QuickActions::Extractor#commands_regex,
// in Go's syntax: a fenced code block (opened by ``` at a line's start and
// closed by a line that is exactly ```), an HTML block (a line that is
// only a tag, up to a line that is only a closing tag) and a >>> quote are
// passed over; anywhere else, a line that starts with /<name> and has
// nothing but an argument after it is a command. Like GitLab's, the code
// block's rule is not CommonMark's: a longer fence, or one indented, is not
// a code block to it.
var quickActions = regexp.MustCompile(`(?msi)` +
	"(?P<code>^```.+?\\n```$)" +
	`|(?P<html>^<[^>]+?>\n.+?\n</[^>]+?>$)` +
	`|(?P<quote>^>>>.+?\n>>>$)` +
	`|(?:^/(?P<cmd>` + strings.Join(quickActionNames, "|") + `)(?: (?P<arg>[^\n]*))?(?:\s*\n|$))`)

// runQuickActions does what GitLab does with a note written through the API
// by a member who may update the merge request: it takes the quick actions
// out of the text, runs them, and returns what is left, without carriage
// returns and trailing whitespace; /merge, /close and
// /reopen change the merge request's state. Call with s.mu held.
func (s *Server) runQuickActions(mr *mergeRequest, text string) string {
	text = strings.ReplaceAll(text, "\r", "")
	cmd, arg := quickActions.SubexpIndex("cmd"), quickActions.SubexpIndex("arg")
	var out strings.Builder
	last := 0
	for _, m := range quickActions.FindAllStringSubmatchIndex(text, -1) {
		if m[2*cmd] < 0 {
			continue
		}
		out.WriteString(text[last:m[0]])
		last = m[1]
		action := "/" + strings.ToLower(text[m[2*cmd]:m[2*cmd+1]])
		if m[2*arg] >= 0 {
			action += " " + strings.TrimSpace(text[m[2*arg]:m[2*arg+1]])
		}
		mr.quickActions = append(mr.quickActions, action)
		switch action {
		case "/merge":
			mr.State = "merged"
		case "/close":
			mr.State = "closed"
		case "/reopen":
			mr.State = "opened"
		}
	}
	out.WriteString(text[last:])
	// Like GitLab's, what is left loses its carriage returns and trailing
	// whitespace (Ruby's rstrip), commands or not.
	return strings.TrimRight(out.String(), "\x00\t\n\v\f\r ")
}

// QuickActions returns the quick actions GitLab ran from the notes written
// on a merge request through the API, in order ("/merge", "/label ~x").
// It panics if there is no such project.
func (s *Server) QuickActions(projectPath string, iid int64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mustProject(projectPath).mr(iid)
	if mr == nil {
		return nil
	}
	return append([]string(nil), mr.quickActions...)
}
