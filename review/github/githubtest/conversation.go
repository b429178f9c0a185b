package githubtest

// The conversation endpoints: review threads (each inline comment posted
// with a review opens one) listed and resolved through GraphQL, replies
// in a thread, issue comments, reactions, the collaborator permission API
// and the compare API. Each is recorded like every other request.

import (
	"net/http"
	"strconv"
	"strings"
)

// Endpoints of the conversation.
const (
	GraphQL          Endpoint = "graphql"
	ReplyComment     Endpoint = "pulls/create-reply-for-review-comment"
	CreateComment    Endpoint = "issues/create-comment"
	CreateReaction   Endpoint = "reactions/create-for-issue-comment"
	GetPermission    Endpoint = "repos/get-collaborator-permission-level"
	CompareCommits   Endpoint = "repos/compare-commits"
	ResolveThreadOp  Endpoint = "graphql/resolveReviewThread"
	ListThreadsQuery Endpoint = "graphql/reviewThreads"
)

// Thread is a review thread as the stand-in keeps it.
type Thread struct {
	ID       string // node id, "PRRT_<n>"
	Path     string
	Line     int
	Resolved bool
	Outdated bool
	Comments []ThreadComment
}

// ThreadComment is one comment of a thread.
type ThreadComment struct {
	ID     int64
	Author string // a REST login: "gilf[bot]" for the App
	Bot    bool
	Body   string
}

// Reaction is one reaction that landed.
type Reaction struct {
	CommentID int64
	Content   string
}

// Comparison is what GET …/compare/{base}...{head} answers for one pair.
type Comparison struct {
	Status string // ahead, behind, diverged, identical
	// Files are the changed files' patches by name, in Order.
	Files map[string]string
	Order []string
}

// conversation is the stand-in's conversation state; guarded by Server.mu.
type conversation struct {
	threads       []*Thread
	reactions     []Reaction
	issueComments []map[string]any
	permissions   map[string]string
	comparisons   map[string]Comparison
	resolved      []string // thread ids, each resolve request that landed
}

// conversationRoutes mounts the conversation endpoints.
func (s *Server) conversationRoutes(mux *http.ServeMux, bp string) {
	s.conv = &conversation{permissions: map[string]string{}, comparisons: map[string]Comparison{}}
	gql := bp + "/graphql"
	if p, ok := strings.CutSuffix(bp, "/v3"); ok {
		gql = p + "/graphql" // GHES: /api/graphql beside /api/v3
	}
	mux.HandleFunc("POST "+gql, s.graphql)
	mux.HandleFunc("POST "+bp+"/repos/{owner}/{repo}/pulls/{number}/comments/{id}/replies", s.repo(ReplyComment, s.replyComment))
	mux.HandleFunc("POST "+bp+"/repos/{owner}/{repo}/pulls/{number}/comments", s.repo(ReplyComment, s.replyComment))
	mux.HandleFunc("POST "+bp+"/repos/{owner}/{repo}/issues/{number}/comments", s.repo(CreateComment, s.createIssueComment))
	mux.HandleFunc("POST "+bp+"/repos/{owner}/{repo}/issues/comments/{id}/reactions", s.repo(CreateReaction, s.createReaction))
	mux.HandleFunc("GET "+bp+"/repos/{owner}/{repo}/collaborators/{user}/permission", s.repo(GetPermission, s.getPermission))
	mux.HandleFunc("GET "+bp+"/repos/{owner}/{repo}/compare/{basehead}", s.repo(CompareCommits, s.compare))
}

// openThreadsLocked opens one thread per inline comment of a review;
// s.mu is held.
func (s *Server) openThreadsLocked(comments []map[string]any) {
	for _, c := range comments {
		s.nextID++
		line, _ := c["line"].(int)
		s.conv.threads = append(s.conv.threads, &Thread{
			ID: "PRRT_" + strconv.FormatInt(s.nextID, 10), Path: c["path"].(string), Line: line,
			Comments: []ThreadComment{{ID: s.nextID, Author: s.opts.BotLogin, Bot: true, Body: c["body"].(string)}},
		})
	}
}

// SetPermission sets what the collaborator permission API answers for
// login (admin, write, read, none). A login never set answers 404, as
// GitHub does for a user who is not a collaborator.
func (s *Server) SetPermission(login, level string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conv.permissions[strings.ToLower(login)] = level
}

// SetPatches replaces the changed files' patches (a new push).
func (s *Server) SetPatches(p map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.Patches = p
}

// SetComparison sets what the compare API answers for base...head.
func (s *Server) SetComparison(base, head string, c Comparison) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conv.comparisons[base+"..."+head] = c
}

// HumanReply adds a person's reply to the thread whose first comment is
// commentID (as if login answered on GitHub); false when no such thread.
func (s *Server) HumanReply(commentID int64, login, body string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.threadLocked(commentID)
	if t == nil {
		return false
	}
	s.nextID++
	t.Comments = append(t.Comments, ThreadComment{ID: s.nextID, Author: login, Body: body})
	return true
}

// SetThreadLine moves a thread's line (GitHub follows a commented line
// through later pushes); 0 makes it outdated.
func (s *Server) SetThreadLine(commentID int64, line int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.threadLocked(commentID); t != nil {
		t.Line, t.Outdated = line, line == 0
	}
}

// Threads returns the review threads in their current state.
func (s *Server) Threads() []Thread {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Thread, 0, len(s.conv.threads))
	for _, t := range s.conv.threads {
		c := *t
		c.Comments = append([]ThreadComment(nil), t.Comments...)
		out = append(out, c)
	}
	return out
}

// Resolutions returns the thread ids of every resolveReviewThread that
// landed, in order (a thread resolved twice is listed twice).
func (s *Server) Resolutions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.conv.resolved...)
}

// Reactions returns the reactions that landed, in order.
func (s *Server) Reactions() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Reaction(nil), s.conv.reactions...)
}

// IssueComments returns the bodies of the issue comments posted, in
// order.
func (s *Server) IssueComments() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.conv.issueComments {
		out = append(out, c["body"].(string))
	}
	return out
}

func (s *Server) threadLocked(commentID int64) *Thread {
	for _, t := range s.conv.threads {
		for _, c := range t.Comments {
			if c.ID == commentID {
				return t
			}
		}
	}
	return nil
}

// replyComment is POST …/pulls/{n}/comments/{id}/replies, or POST
// …/pulls/{n}/comments with in_reply_to (go-github's form): body is
// required; the reply joins the thread of that comment (404 when none).
// A new top-level comment (no in_reply_to) is not served (422).
func (s *Server) replyComment(w http.ResponseWriter, r *http.Request, body map[string]any) {
	if !s.number(w, r) {
		return
	}
	text, ok := s.requiredBody(w, body)
	if !ok {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if r.PathValue("id") == "" {
		f, ok := body["in_reply_to"].(float64)
		if !ok {
			s.writeFault(w, Fault{Kind: Validation})
			return
		}
		id = int64(f)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.threadLocked(id)
	if t == nil {
		s.basicError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.nextID++
	t.Comments = append(t.Comments, ThreadComment{ID: s.nextID, Author: s.opts.BotLogin, Bot: true, Body: text})
	writeJSON(w, http.StatusCreated, map[string]any{
		"id": s.nextID, "body": text, "path": t.Path, "line": t.Line, "in_reply_to_id": t.Comments[0].ID,
		"user": map[string]any{"login": s.opts.BotLogin, "type": "Bot"},
	})
}

// requiredBody reads a comment's body; an empty one is GitHub's 422.
func (s *Server) requiredBody(w http.ResponseWriter, body map[string]any) (string, bool) {
	text, _ := body["body"].(string)
	if text == "" {
		s.writeFault(w, Fault{Kind: Validation})
	}
	return text, text != ""
}

// createIssueComment is POST …/issues/{n}/comments, answered with the
// real example's shape.
func (s *Server) createIssueComment(w http.ResponseWriter, r *http.Request, body map[string]any) {
	if !s.number(w, r) {
		return
	}
	text, ok := s.requiredBody(w, body)
	if !ok {
		return
	}
	c := s.example("issues.create-comment.response.201.default.json")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	c["id"], c["body"] = s.nextID, text
	user := c["user"].(map[string]any)
	user["login"], user["type"] = s.opts.BotLogin, "Bot"
	s.conv.issueComments = append(s.conv.issueComments, c)
	writeJSON(w, http.StatusCreated, cloneValue(c))
}

// createReaction is POST …/issues/comments/{id}/reactions: content must
// be one of GitHub's eight; a reaction that exists answers 200, a new one
// 201.
func (s *Server) createReaction(w http.ResponseWriter, r *http.Request, body map[string]any) {
	content, _ := body["content"].(string)
	switch content {
	case "+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes":
	default:
		s.writeFault(w, Fault{Kind: Validation})
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		s.basicError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	code := http.StatusCreated
	for _, x := range s.conv.reactions {
		if x.CommentID == id && x.Content == content {
			code = http.StatusOK
		}
	}
	if code == http.StatusCreated {
		s.conv.reactions = append(s.conv.reactions, Reaction{CommentID: id, Content: content})
	}
	s.nextID++
	writeJSON(w, code, map[string]any{"id": s.nextID, "content": content,
		"user": map[string]any{"login": s.opts.BotLogin, "type": "Bot"}, "created_at": s.opts.Now().UTC().Format("2006-01-02T15:04:05Z")})
}

// getPermission answers the collaborator permission API as GitHub does:
// permission is admin, write, read or none; role_name the finer role.
func (s *Server) getPermission(w http.ResponseWriter, r *http.Request, _ map[string]any) {
	user := r.PathValue("user")
	s.mu.Lock()
	level, ok := s.conv.permissions[strings.ToLower(user)]
	s.mu.Unlock()
	if !ok {
		s.basicError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"permission": level, "role_name": level,
		"user": map[string]any{"login": user, "type": "User", "permissions": map[string]bool{
			"admin": level == "admin", "push": level == "admin" || level == "write", "pull": level != "none"}},
	})
}

// compare answers GET …/compare/{base}...{head} from SetComparison; an
// unknown pair is a 404 (GitHub's answer for a commit it does not have).
func (s *Server) compare(w http.ResponseWriter, r *http.Request, _ map[string]any) {
	s.mu.Lock()
	c, ok := s.conv.comparisons[r.PathValue("basehead")]
	s.mu.Unlock()
	if !ok {
		s.basicError(w, http.StatusNotFound, "Not Found")
		return
	}
	files := []any{}
	for _, name := range c.Order {
		files = append(files, map[string]any{"filename": name, "status": "modified", "patch": c.Files[name]})
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": c.Status, "ahead_by": len(c.Order), "behind_by": 0,
		"total_commits": len(c.Order), "commits": []any{}, "files": files})
}

// graphql serves the two operations gilf sends: the reviewThreads query
// and the resolveReviewThread mutation, with an installation token. Any
// other document gets GitHub's shape of an error answer (200 with
// "errors").
func (s *Server) graphql(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	_, auth := s.installationToken(r) // any repository's: GraphQL names it in the query
	query, _ := body["query"].(string)
	vars, _ := body["variables"].(map[string]any)
	ep := GraphQL
	switch {
	case strings.Contains(query, "resolveReviewThread"):
		ep = ResolveThreadOp
	case strings.Contains(query, "reviewThreads"):
		ep = ListThreadsQuery
	}
	s.record(r, ep, auth, body)
	if f, ok := s.takeFault(ep); ok {
		s.writeFault(w, f)
		return
	}
	switch {
	case auth != "token":
		s.basicError(w, http.StatusUnauthorized, "Bad credentials")
	case err != nil:
		s.basicError(w, http.StatusBadRequest, "Problems parsing JSON")
	case ep == ResolveThreadOp:
		s.resolveThread(w, vars)
	case ep == ListThreadsQuery:
		s.listThreads(w, vars)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"errors": []any{map[string]any{"message": "githubtest: unknown GraphQL document"}}})
	}
}

func (s *Server) resolveThread(w http.ResponseWriter, vars map[string]any) {
	id, _ := vars["threadId"].(string)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.conv.threads {
		if t.ID == id {
			t.Resolved = true
			s.conv.resolved = append(s.conv.resolved, id)
			writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{
				"resolveReviewThread": map[string]any{"thread": map[string]any{"id": id, "isResolved": true}}}})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"resolveReviewThread": nil},
		"errors": []any{map[string]any{"type": "NOT_FOUND", "path": []any{"resolveReviewThread"},
			"message": "Could not resolve to a node with the global id of '" + id + "'"}}})
}

// threadsPerPage is the stand-in's page of reviewThreads (small, so
// pagination is exercised).
const threadsPerPage = 2

func (s *Server) listThreads(w http.ResponseWriter, vars map[string]any) {
	owner, _ := vars["owner"].(string)
	name, _ := vars["name"].(string)
	number, _ := vars["number"].(float64)
	after, _ := vars["after"].(string)
	if !strings.EqualFold(owner, s.opts.Owner) || !strings.EqualFold(name, s.opts.Repo) {
		writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"repository": nil},
			"errors": []any{map[string]any{"type": "NOT_FOUND", "message": "Could not resolve to a Repository with the name '" + owner + "/" + name + "'."}}})
		return
	}
	if int(number) != s.opts.Number {
		writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"repository": map[string]any{"pullRequest": nil}},
			"errors": []any{map[string]any{"type": "NOT_FOUND", "message": "Could not resolve to a PullRequest with the number of " + strconv.Itoa(int(number)) + "."}}})
		return
	}
	start := 0
	if after != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(after, "cursor:"))
		if err != nil {
			writeJSON(w, http.StatusOK, map[string]any{"errors": []any{map[string]any{"message": "`" + after + "` does not appear to be a valid cursor."}}})
			return
		}
		start = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	end := min(start+threadsPerPage, len(s.conv.threads))
	start = min(start, end)
	nodes := []any{}
	for _, t := range s.conv.threads[start:end] {
		var comments []any
		for _, c := range t.Comments {
			login, typ := c.Author, "User"
			if c.Bot {
				login, typ = strings.TrimSuffix(c.Author, "[bot]"), "Bot" // GraphQL names a bot without [bot]
			}
			comments = append(comments, map[string]any{"databaseId": c.ID, "body": c.Body, "author": map[string]any{"__typename": typ, "login": login}})
		}
		var line any
		if t.Line > 0 {
			line = t.Line
		}
		nodes = append(nodes, map[string]any{"id": t.ID, "isResolved": t.Resolved, "isOutdated": t.Outdated, "path": t.Path, "line": line,
			"comments": map[string]any{"nodes": comments}})
	}
	page := map[string]any{"hasNextPage": end < len(s.conv.threads), "endCursor": "cursor:" + strconv.Itoa(end)}
	writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"repository": map[string]any{"pullRequest": map[string]any{
		"reviewThreads": map[string]any{"pageInfo": page, "nodes": nodes}}}}})
}
