// Fleet: who may connect to a CURVE farm -- the key ring the ZAP handler admits from (usable join
// tokens, enrolled and unrevoked worker keys), join tokens, enrolment over a join-token
// connection, and revoking or readmitting a worker.

#include <spdlog/spdlog.h>

#include "scheduler/broker/event_sink.h"
#include "scheduler/broker/fleet.h"
#include "scheduler/broker/outbox.h"
#include "shared/base/utf8.h"
#include "shared/wire/curve_keys.h"

namespace tessera::broker {

using protocol::MessageType;

Status Fleet::LoadKeyRing(Pass& pass) {
  TSR_ASSIGN_OR_RETURN(std::vector<store::JoinTokenRecord> tokens, pass.store.ListJoinTokens());
  for (const store::JoinTokenRecord& t : tokens) {
    if (t.usable(pass.wall_ms)) {
      keys_.Put(t.public_key, security::Admission::JoinToken(t.id, t.expires_at_ms));
    }
  }
  TSR_ASSIGN_OR_RETURN(std::vector<store::WorkerKeyRecord> workers, pass.store.ListWorkerKeys());
  for (const store::WorkerKeyRecord& w : workers) {
    if (!w.revoked_at_ms) keys_.Put(w.public_key, security::Admission::Worker(w.name));
  }
  return Status::Ok();
}

StatusOr<NewJoinToken> Fleet::CreateJoinToken(Pass& pass, const std::string& note, int64_t ttl_s,
                                              int max_uses, const std::string& worker_name) {
  if (!p_.options.curve) {
    return Status::FailedPrecondition(
        "this scheduler runs without CURVE (broker.security: insecure): workers need no token");
  }
  if (ttl_s < 0) return Status::InvalidArgument("ttl: must be 0 (never expires) or positive");
  if (max_uses < 0) return Status::InvalidArgument("uses: must be 0 (unlimited) or positive");
  if (note.size() > 256) return Status::InvalidArgument("note: at most 256 characters");
  TSR_RETURN_IF_ERROR(utf8::Check(note, "note"));
  TSR_RETURN_IF_ERROR(utf8::Check(worker_name, "name"));
  if (worker_name.size() > protocol::kMaxNameBytes) {
    return Status::InvalidArgument("name: at most " + std::to_string(protocol::kMaxNameBytes) +
                                   " bytes");
  }
  NewJoinToken created;
  created.token = curve::NewJoinToken();
  TSR_ASSIGN_OR_RETURN(curve::KeyPair keys, curve::JoinTokenKeys(created.token));
  std::optional<int64_t> expires;
  if (ttl_s > 0) expires = pass.wall_ms + ttl_s * 1000;
  TSR_ASSIGN_OR_RETURN(created.record, pass.store.CreateJoinToken(keys.public_key, note, expires,
                                                                  max_uses, worker_name));
  keys_.Put(keys.public_key, security::Admission::JoinToken(created.record.id, expires));
  spdlog::info("join token {} created{}{}", created.record.id,
               worker_name.empty() ? "" : " for worker " + worker_name,
               note.empty() ? "" : " (" + note + ")");
  return created;
}

StatusOr<store::JoinTokenRecord> Fleet::RevokeJoinToken(store::Store& store, int64_t token_id) {
  TSR_ASSIGN_OR_RETURN(store::JoinTokenRecord record, store.RevokeJoinToken(token_id));
  keys_.RemoveToken(token_id);
  spdlog::info("join token {} revoked", token_id);
  return record;
}

Status Fleet::RevokeKey(store::Store& store, const std::string& name) {
  TSR_ASSIGN_OR_RETURN(store::WorkerKeyRecord record, store.SetWorkerRevoked(name, true));
  keys_.RemoveWorker(name);
  spdlog::warn("worker {} revoked: its key is refused from now on", name);
  return Status::Ok();
}

void Fleet::Revoked(Pass& pass, const std::string& name) {
  pass.events.Record(std::nullopt, std::nullopt, std::nullopt, "worker_revoked", name);
  auto it = p_.workers.FindByName(name);
  if (it == p_.workers.end()) return;
  pass.outbox.Send(it->first, protocol::Encode(MessageType::kReject,
                                               protocol::Reject{"revoked by an operator"}));
  Drop(pass, it->first, "revoked by an operator");
}

void Fleet::OnEnrol(Pass& pass, const std::string& identity, const protocol::Envelope& env,
                    const std::string& user_id) {
  auto reject = [&](const std::string& reason) {
    p_.boundary.noisy().LogAt(pass.now, spdlog::level::warn, "enrolment refused",
                              "enrolment refused: {}", reason);
    pass.outbox.Send(identity, protocol::Encode(MessageType::kReject, protocol::Reject{reason}));
  };
  if (!p_.options.curve) return reject("this scheduler does not enrol workers (insecure mode)");
  std::optional<security::Admission> who = security::ParseUserId(user_id);
  if (!who || who->kind != security::Admission::Kind::kJoinToken) {
    return reject("enrolment needs a join-token connection");
  }
  auto m = env.As<protocol::Enrol>();  // a valid UTF-8 name of 1..128 bytes (protocol::Check)
  if (!m.ok()) {
    p_.boundary.DropMessage(pass, identity, m.status().message());
    return reject(m.status().message());
  }
  StatusOr<std::string> key = curve::ParseKey(m->public_key, "public_key");
  if (!key.ok()) return reject(key.status().message());
  StatusOr<store::Store::Enrolment> enrolled = pass.store.EnrolWorker(m->name, *key, who->token_id);
  if (!enrolled.ok() && enrolled.status().code() == StatusCode::kAlreadyExists) {
    // Someone with a join token asked for a name that belongs to an enrolled worker.
    return p_.boundary.RefuseName(pass, identity, m->name, "enrolment_refused",
                                  "enrolment with join token " + std::to_string(who->token_id) +
                                      " refused: " + enrolled.status().message(),
                                  /*retry_after_ms=*/0);
  }
  if (!enrolled.ok()) return reject(enrolled.status().message());
  if (enrolled->replaced_key) {
    // A token made for this name replaced its key: the machine holding the old one is out.
    keys_.Remove(*enrolled->replaced_key);
    if (auto old = p_.workers.FindByName(m->name); old != p_.workers.end()) {
      pass.outbox.Send(old->first,
                       protocol::Encode(MessageType::kReject,
                                        protocol::Reject{"this worker's key was replaced by a new "
                                                         "enrolment under its name"}));
      Drop(pass, old->first, "its key was replaced by a new enrolment");
    }
  }
  keys_.Put(*key, security::Admission::Worker(m->name));
  // A token that just ran out of uses admits nobody new.
  if (!enrolled->token_usable) keys_.RemoveToken(who->token_id);
  pass.events.Record(std::nullopt, std::nullopt, std::nullopt, "worker_enrolled",
                     m->name + " with join token " + std::to_string(who->token_id));
  spdlog::info("worker {} enrolled with join token {}{}", m->name, who->token_id,
               enrolled->replaced_key ? " (its previous key is no longer valid)" : "");
  pass.outbox.Send(identity, protocol::Encode(MessageType::kEnrolled, protocol::Enrolled{m->name}));
}

}  // namespace tessera::broker
