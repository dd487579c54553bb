// Command oracle answers allocation, CEL and placement questions with the
// upstream Kubernetes 1.37 libraries and kube-scheduler's own plugins, so that
// dra-affinity's Python implementation can be compared against them
// (differentially) case by case.
//
// Protocol: one JSON request per line on stdin, one JSON answer per line on
// stdout, in order. The process serves requests until stdin is closed, so a
// test suite pays the start-up cost once. Malformed requests get an answer
// with "fatal" set instead of terminating the process.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// request is the envelope common to all operations; the operation-specific
// payload is decoded again from the raw line by the handler.
type request struct {
	ID any    `json:"id,omitempty"`
	Op string `json:"op"`
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 && !(len(line) == 1 && line[0] == '\n') {
			answer := handle(line)
			if encErr := enc.Encode(answer); encErr != nil {
				_ = enc.Encode(map[string]any{"fatal": "encoding answer: " + encErr.Error()})
			}
			if flushErr := out.Flush(); flushErr != nil {
				fmt.Fprintln(os.Stderr, "oracle: writing stdout:", flushErr)
				os.Exit(1)
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "oracle: reading stdin:", err)
			os.Exit(1)
		}
	}
}

// handle dispatches one request line and never panics: an unexpected panic in
// the libraries is reported as a fatal answer for that request only.
func handle(line []byte) (answer map[string]any) {
	var req request
	defer func() {
		if r := recover(); r != nil {
			answer = map[string]any{"id": req.ID, "fatal": fmt.Sprintf("panic: %v", r)}
		}
	}()
	if err := json.Unmarshal(line, &req); err != nil {
		return map[string]any{"fatal": "request is not a JSON object with an op: " + err.Error()}
	}
	var result map[string]any
	var err error
	switch req.Op {
	case "allocate":
		result, err = handleAllocate(line)
	case "cel":
		result, err = handleCEL(line)
	case "placement":
		result, err = handlePlacement(line)
	case "ping":
		result = map[string]any{"pong": true}
	default:
		err = fmt.Errorf("unknown op %q (want allocate, cel, placement or ping)", req.Op)
	}
	if err != nil {
		return map[string]any{"id": req.ID, "fatal": err.Error()}
	}
	result["id"] = req.ID
	return result
}
