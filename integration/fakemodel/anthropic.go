package fakemodel

import "net/http"

// anthropic answers a Messages API request. (Being written.)
func (s *Server) anthropic(w http.ResponseWriter, rep Reply) {
	http.Error(w, "not implemented yet", http.StatusNotImplemented)
}
