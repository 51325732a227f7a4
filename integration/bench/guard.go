package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/shiroagent/shiro/agent"
)

// guardTable is the guard's table of real-world command lines (issue 31),
// the one its tests read.
const guardTable = "agent/testdata/guard/realworld.txt"

// guardBench times the guard, as --yolo runs it, over every command line
// of its real-world table: per command, the median of rounds that each
// judge the whole table, and the slowest command on its own.
func guardBench(_ context.Context, r *report) error {
	commands, err := readGuardTable()
	if err != nil {
		return err
	}
	const workspace = "/home/dev/project"
	judge := func(c string) { agent.GuardReasonIn(workspace, c, true) }
	for _, c := range commands {
		judge(c) // warm up
	}
	var rounds []time.Duration
	for range 50 {
		start := time.Now()
		for _, c := range commands {
			judge(c)
		}
		rounds = append(rounds, time.Since(start)/time.Duration(len(commands)))
	}
	slowest, slowestAt := time.Duration(0), ""
	for _, c := range commands {
		var ds []time.Duration
		for range 21 {
			start := time.Now()
			judge(c)
			ds = append(ds, time.Since(start))
		}
		if m := median(ds); m > slowest {
			slowest, slowestAt = m, c
		}
	}
	per := median(rounds)
	r.section("guard (issue 31)")
	r.add(fmt.Sprintf("guard, per command over its table of %d, median of 50 rounds", len(commands)), us(per), "< 50 µs", per < 50*time.Microsecond)
	r.add(fmt.Sprintf("slowest command, median of 21 (%.40s)", slowestAt), us(slowest), "", true)
	return nil
}

// readGuardTable returns the command lines of the table (VERDICT CLASS
// COMMAND a line; # starts a comment).
func readGuardTable() ([]string, error) {
	f, err := os.Open(guardTable)
	if err != nil {
		return nil, fmt.Errorf("the guard's table (run the bench from the repository's root, as make bench does): %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.SplitN(line, " ", 2)
		if len(fields) < 2 {
			continue
		}
		_, command, _ := strings.Cut(strings.TrimSpace(fields[1]), " ")
		out = append(out, strings.TrimSpace(command))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no command lines", guardTable)
	}
	return out, nil
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1000) }
