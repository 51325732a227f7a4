package fakemodel

import "net/http"

// responses answers an OpenAI Responses API request. (Being written.)
func (s *Server) responses(w http.ResponseWriter, rep Reply) {
	http.Error(w, "not implemented yet", http.StatusNotImplemented)
}

// chat answers an OpenAI Chat Completions request. (Being written.)
func (s *Server) chat(w http.ResponseWriter, rep Reply) {
	http.Error(w, "not implemented yet", http.StatusNotImplemented)
}
