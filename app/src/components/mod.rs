//! The widget's components, one per file, named for what the user sees.

pub mod approval_dialog;
mod badge;
pub mod chat_panel;
pub mod composer;
pub mod compression_settings;
pub mod connection_status;
pub mod context_footer;
pub mod context_view;
pub mod context_viewer;
pub mod draft_preview;
pub mod empty_chat;
mod history_window;
mod icons;
mod in_context;
pub mod lazy_panel;
pub mod markdown_view;
mod message_list_follow;
pub mod message_view;
pub mod receipt_view;
pub mod session_drawer;
pub mod token_meter;
pub mod topic_panel;
pub mod user_sessions;
