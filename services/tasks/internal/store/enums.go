package store

import (
	"strings"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Enums are stored by their name without prefix in lower case ("in_progress"), the same
// keys GetTaskStats returns; priority is stored as its number so it sorts.

// StatusName is the stored and reported name of s, e.g. "in_progress".
func StatusName(s tasksv1.TaskStatus) string { return enumName(s.String(), "TASK_STATUS_") }

// SourceName is the stored and reported name of s, e.g. "github".
func SourceName(s tasksv1.TaskSource) string { return enumName(s.String(), "TASK_SOURCE_") }

// PriorityName is the reported name of p, e.g. "urgent".
func PriorityName(p typev1.Priority) string { return enumName(p.String(), "PRIORITY_") }

func enumName(full, prefix string) string { return strings.ToLower(strings.TrimPrefix(full, prefix)) }

func upper(name string) string { return strings.ToUpper(name) }

func parsePriority(name string) typev1.Priority {
	return typev1.Priority(typev1.Priority_value["PRIORITY_"+strings.ToUpper(name)])
}

func parseStatus(name string) tasksv1.TaskStatus {
	return tasksv1.TaskStatus(tasksv1.TaskStatus_value["TASK_STATUS_"+strings.ToUpper(name)])
}

func parseSource(name string) tasksv1.TaskSource {
	return tasksv1.TaskSource(tasksv1.TaskSource_value["TASK_SOURCE_"+strings.ToUpper(name)])
}

// closed reports whether s ends a task's life (until it is reopened).
func closed(s tasksv1.TaskStatus) bool {
	return s == tasksv1.TaskStatus_TASK_STATUS_DONE || s == tasksv1.TaskStatus_TASK_STATUS_CANCELLED
}
