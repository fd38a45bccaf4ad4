// Package metrics defines every Prometheus metric the pipeline exports, so
// the names the dashboard and the alert rules in deploy/ depend on live in
// one place and are tested together.
//
// One Metrics value per process, built by New on a Registerer the caller
// owns: the package keeps no global state and registers nothing in init.
// The runtime reports events through small typed methods (Input(topic).Add,
// CheckpointCompleted, TransactionCommitted, ...) that take time.Duration
// and time.Time, so units cannot be mixed up: every duration is exported in
// seconds, every size in bytes, and every timestamp as Unix seconds.
//
// Conventions, all checked by the tests (promtool check metrics):
//
//   - Names start with pipeline_ and end with their unit; counters end with
//     _total.
//   - Every pipeline_ series carries the label pipeline="<job name>", so one
//     Prometheus can watch several jobs and alerts name the job.
//   - Other labels are low-cardinality: topic, partition (consumer lag
//     only), operator, task (one per source task and worker), instance_id
//     (one per process, group mode), and
//     fixed vocabularies for reason and code. Never put
//     an error message, a key or an offset in a label.
//   - Series an alert or a panel needs before their first event (failed
//     checkpoints and restarts by reason, dead letters by code) exist at 0
//     from the start: increase() cannot see the first event of a series
//     that appears with it.
//   - Ages are not exported as values that only change when something
//     happens: the last checkpoint's completion is a timestamp (its age is
//     time() - pipeline_checkpoint_last_completed_timestamp_seconds in
//     PromQL) and the open transaction's age is computed at scrape time, so
//     both keep growing while the job is stuck, which is when they matter.
//
// # The metrics, and the method that moves each
//
//	pipeline_info{guarantee,version}                       SetInfo ("unknown" until then)
//	pipeline_records_in_total{topic}, pipeline_bytes_in_total{topic}
//	                                                       Input(topic).Add
//	pipeline_records_out_total{topic}, pipeline_bytes_out_total{topic}
//	                                                       Output(topic).Add
//	pipeline_consumer_lag_records{topic,partition}         SetLag, ForgetPartition
//	pipeline_end_to_end_latency_seconds (histogram)        EndToEnd
//	pipeline_dead_letter_records_total{code}               DeadLettered
//	pipeline_timestamps_replaced_total{topic}              TimestampReplaced
//	pipeline_checkpoint_duration_seconds (histogram)       CheckpointCompleted
//	pipeline_checkpoint_alignment_seconds (histogram)      CheckpointCompleted
//	pipeline_checkpoint_size_bytes (histogram)             CheckpointCompleted
//	pipeline_checkpoint_last_completed_id                  CheckpointCompleted, Restored
//	pipeline_checkpoint_last_completed_timestamp_seconds   CheckpointCompleted
//	pipeline_checkpoint_interval_seconds                   SetCheckpointInterval
//	pipeline_checkpoints_failed_total{reason}              CheckpointFailed
//	pipeline_transaction_commit_duration_seconds (hist.)   TransactionCommitted
//	pipeline_transaction_aborts_total                      TransactionAborted
//	pipeline_transaction_fenced_total                      Fenced
//	pipeline_transaction_age_seconds                       TransactionBegan, until TransactionCommitted,
//	                                                       TransactionAborted or Fenced
//	pipeline_transaction_timeout_seconds                   SetTransactionTimeout
//	pipeline_restarts_total{reason}                        Restarted
//	pipeline_state_keys{operator}, pipeline_state_bytes{operator}
//	                                                       SetState
//	pipeline_state_restore_duration_seconds                Restored
//	pipeline_savepoints_total{result}                      SavepointCompleted, SavepointFailed
//	pipeline_savepoint_duration_seconds                    SavepointCompleted
//	pipeline_operator_records_total{operator}              OperatorRecords(id).Add
//	pipeline_step_records_total{operator,result}           StepRecords(id, result).Add
//	pipeline_operator_dead_letters_total{operator}         OperatorDeadLetter
//	pipeline_operator_late_records_total{operator}         LateRecord
//	pipeline_task_blocked_seconds_total{task}              TaskBlocked(task).Add
//	pipeline_watermark_partition_idle{topic,partition}     SetPartitionIdle
//	pipeline_group_member_info{instance_id}                SetGroupMember (group mode only)
//	pipeline_group_generation{instance_id}                 SetAssignment
//	pipeline_group_assigned_partitions{instance_id,topic}  SetAssignment
//	pipeline_group_members{instance_id}                    SetAssignment
//	pipeline_group_local_shuffle_partitions{instance_id}   SetLocalShuffle
//	pipeline_kafka_*{client}                               KafkaHooks (franz-go plugin/kprom)
//	go_*, process_*                                        the Go and process collectors
package metrics
