package fakegithub

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// The update-branch endpoint of the fake: PUT
// /repos/{o}/{r}/pulls/{n}/update-branch merges the base into the head and answers 202
// Accepted. As on GitHub, the head moves in the background: the next Options.UpdateLag
// reads of the pull request still show the old head.

// update is an accepted branch update whose head move is not visible yet.
type update struct {
	ref, sha string
	reads    int // reads of the pull request still to show the old head
}

// settle makes a pending branch update of is visible once its reads are used up.
func (s *Server) settle(rp *repo, is *issue) {
	u := rp.pending[is.number]
	if u == nil {
		return
	}
	if u.reads > 0 {
		u.reads--
		return
	}
	rp.refs[u.ref] = u.sha
	delete(rp.pending, is.number)
}

func (s *Server) updateBranch(w http.ResponseWriter, rp *repo, is *issue, body []byte) {
	var in struct {
		ExpectedHeadSHA string `json:"expected_head_sha"`
	}
	_ = json.Unmarshal(body, &in)
	g := rp.git
	head, base := s.headOf(rp, is), rp.refs["refs/heads/"+is.pull.base]
	switch {
	case is.state != "open":
		writeJSON(w, 422, msg("Pull request is closed."))
		return
	case in.ExpectedHeadSHA != "" && in.ExpectedHeadSHA != head:
		writeJSON(w, 422, msg("expected head sha didn't match current head ref."))
		return
	case g.ancestors(head)[base]:
		writeJSON(w, 422, msg("There are no new commits on the base branch."))
		return
	}
	mb := g.mergeBase(head, base)
	flat, ok := merge3(g.flatten(g.commits[mb].tree), g.flatten(g.commits[head].tree), g.flatten(g.commits[base].tree))
	if !ok {
		writeJSON(w, 422, msg("merge conflict between base and head"))
		return
	}
	sha := g.putCommit(g.build(flat), []string{head, base}, fmt.Sprintf("Merge branch '%s' into %s", is.pull.base, is.pull.head), sig{s.login, ""})
	u := &update{ref: "refs/heads/" + is.pull.head, sha: sha, reads: s.updateLag}
	rp.pending[is.number] = u
	if u.reads == 0 {
		s.settle(rp, is)
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"message": "Updating pull request branch.",
		"url": fmt.Sprintf("https://github.example/%s/%s/pull/%d", rp.owner, rp.name, is.number)})
}
