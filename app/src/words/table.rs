//! The table: every key with its English string. A key's name in snake case is what a host
//! writes in the `strings` property (`Send` → `send`); `{name}` marks a slot filled when shown.
//! A new string is a line here, its French in `french.rs` and a row in docs/strings.md (tests
//! check all three).
//!
//! Two parts: what the first paint can show (in the chat's first download), and what only the
//! panels loaded on first use show (`panels`: their English is a chunk of its own, fetched with
//! the first panel, so the first download does not carry it). A panel's key used by first-load
//! code would show empty until a panel opened: a key goes under `panels` only when every use is in
//! a panel's chunk.

macro_rules! table {
    (
        first { $($(#[$doc1:meta])* $first:ident = $english1:literal,)* }
        panels { $($(#[$doc2:meta])* $panel:ident = $english2:literal,)* }
    ) => {
        /// A string the widget shows.
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash,
            strum::EnumString, strum::IntoStaticStr, strum::EnumCount, strum::VariantArray,
        )]
        #[strum(serialize_all = "snake_case")]
        pub enum Word {
            $($(#[$doc1])* $first,)*
            $($(#[$doc2])* $panel,)*
        }

        /// How many keys the first part has (they come first in [`Word`]).
        pub(crate) const FIRST_COUNT: usize = [$(stringify!($first)),*].len();

        /// The first part's English, in the keys' order.
        pub(crate) static FIRST: [&str; FIRST_COUNT] = [$($english1,)*];

        /// The panels' English, in the keys' order (after the first part's).
        pub(crate) static PANELS: [&str; <Word as strum::EnumCount>::COUNT - FIRST_COUNT] =
            [$($english2,)*];
    };
}

/// A key's English (tests and docs; the widget reads the two parts as they come).
#[cfg(test)]
pub(crate) fn english(word: Word) -> &'static str {
    let i = word as usize;
    if i < FIRST_COUNT {
        FIRST[i]
    } else {
        PANELS[i - FIRST_COUNT]
    }
}

crate::chunks::split_fn! {
    /// The panels' English, fetched with the first panel.
    panels_english / preload_panels_english () -> std::sync::Arc<[&'static str]> => PANELS.to_vec().into()
}

table! {
    first {
        // The composer.
        Send = "Send",
        Stop = "Stop",
        WriteAMessage = "Write a message…",
        Message = "Message",
        WaitForUploads = "Wait for the files to finish uploading.",
        FilesAttached = "Files attached to this message",
        AttachFiles = "Attach files",
        AttachFilesHint = "Attach images or text files (or drop or paste them here)",
        RemoveFile = "Remove {name}",
        FileUploading = "{size} · uploading…",
        UploadNotStarted = "{name}: the upload could not start (this part of the chat did not load); attach it again",
        TooManyFiles = "{name}: a message carries at most {max} files",
        AttachNotConnected = "{name}: not connected yet; attach it again in a moment",
        // The context footer.
        PageContextChanged = "Page context changed: {keys}",
        SessionContext = "Session context: {items}",
        // The chunks' panels (the {panel} slot: the caller's label, e.g. "settings").
        PanelLoading = "Loading {panel}…",
        PanelLoadFailed = "The {panel} panel could not be loaded; check the connection.",
        PanelSettings = "settings",
        PanelTopics = "topics",
        PanelSession = "session",
        PanelWelcome = "welcome",
        PanelApproval = "approval",
        PanelContext = "context",
        PanelPreview = "preview",
        PanelMark = "mark",
        Suggestions = "Suggestions",
        Retry = "Retry",
        // The connection badge.
        Connected = "Connected",
        Connecting = "Connecting…",
        OfflineRetrying = "Offline — retrying in {secs}s",
        Disconnected = "Disconnected",
        ReconnectNow = "Reconnect now",
        // The message view.
        ReplyStopped = "Stopped",
        ReplyInProgress = "Reply in progress",
        UsageCountedExact = "{tokens} tokens in by our count ({encoding})",
        UsageCountedApprox = "~{tokens} tokens in by our count ({encoding})",
        UsageSpentByOurCount = "~{input} in · ~{output} out spent, by our count where the provider reported none (stopped)",
        UsageReported = "{input} in · {output} out reported by the provider",
        UsageCompressed = "↓ compressed ({strategy}): {original} → {compressed} tokens, {dropped} messages left out",
        UsageHint = "Our count of the request beside the provider's, so drift shows",
        ViewContext = "View context",
        ToolsUsed = "Tools used for this reply",
        // The message's mark menu.
        MarkPinnedBadge = "📌 pinned: always sent",
        MarkExcludedBadge = "⊘ excluded: never sent",
        MessageOptions = "Message options",
        MessageOptionsHint = "Pin or exclude this message",
        MarkOptionsLabel = "What reaches the model",
        MarkPin = "Pin: always send",
        MarkExclude = "Exclude: never send",
        MarkClear = "Clear",
        // The pending message.
        RateLimitedKept = "Too many messages for now: this one is kept and goes in {secs} s.",
        BusyKept = "The server is busy or restarting: this message is kept and goes in {secs} s.",
        Dismiss = "Dismiss",
        MessageSending = "Sending…",
        // The chat panel.
        ChatTitle = "Glassbox",
        NewChat = "New chat",
        NewChatKept = "New chat (this conversation stays in your list)",
        NewChatDeleted = "New chat (this conversation is deleted)",
        Topics = "Topics",
        TopicsHint = "Topics: choose which history reaches the model",
        DrawerToggle = "Rules, references and settings",
        DrawerToggleHint = "Rules, references and settings of this conversation",
        ContextSettings = "Context settings",
        Conversation = "Conversation",
        EmptyChat = "Ask anything. Replies stream in here.",
        JumpToLatest = "Jump to latest ↓",
        // The draft preview.
        PreviewLabel = "What this message would carry",
        NoPreview = "No preview: {problem}",
        PreviewWaiting = "Working out what this message would carry…",
        TokensToSend = "{tokens} tokens to send",
        PreviewItems = "Rules and references it would carry",
        PreviewLeftOut = "Left out",
        AddToConversation = "Add {name} to this conversation",
        Add = "Add",
        TokenCount = "{count} tokens",
        RemoveFromConversation = "Remove {name} from this conversation",
        RemoveFromConversationHint = "Remove from this conversation",
        // The token meter.
        ContextWindow = "Context window",
        MeterNoReading = "Context window: no reading yet",
        MeterUsed = "{percent}% of the context window used: {used} of {limit} tokens",
        CompressedFrom = "compressed from {percent}%",
        MeterWarning = "Warning: nearly full",
        MeterCritical = "Critical: full",
        MeterSystemPrompt = "System prompt",
        MeterTools = "Tools",
        MeterKnowledge = "Knowledge",
        MeterMemories = "Memories",
        MeterPageContext = "Page context",
        MeterCompression = "Compression ({strategy}): {original} → {compressed} tokens, {saved} saved; {dropped} messages left out",
        MeterSummarized = "{count} of them summarized",
        MeterBudget = "Budget: {remaining} of {limit} tokens left in this conversation",
        VocabLoading = "Vocabulary {encoding}: loading, counts are estimates",
        VocabCached = "Vocabulary {encoding}: from the browser cache",
        VocabDownloaded = "Vocabulary {encoding}: {size} kB downloaded",
        VocabReady = "Vocabulary {encoding}: ready",
        VocabFailed = "Vocabulary {encoding} failed ({message}); counts are estimates",
        VocabNotExact = "{line} (not this model's own tokenizer: counts are close, not exact)",
        // The live region (client/session.rs).
        ReplyComplete = "Reply complete: {text}",
        ReplyFailed = "Reply failed: {message}",
        Overflow = "This message cannot be sent: the conversation needs {needed} tokens but the model's window has room for {room} (after reserving the reply). Shorten the message, turn on compression or lower “Keep recent messages”, or start a new chat.",
        // The context footer: a port's tooltip.
        FooterPort = "port {port}",
    }
    panels {
        // The context dialog ("View context").
        ContextDialogTitle = "What the model was given",
        Close = "Close",
        // The receipt (inside the context dialog).
        ReceiptReplyGone = "This reply is no longer in the conversation.",
        ReceiptNothingRecorded = "Nothing was recorded for this reply.",
        ReceiptUnreadable = "The receipt could not be read: {why}",
        ReceiptStoredBefore = "This reply was stored before Glassbox kept receipts: only the totals are known.",
        ReceiptSentInOrder = "Sent to the model, in order",
        ReceiptLeftOut = "Left out",
        ReceiptNoHistoryLeftOut = "No history was left out.",
        ReceiptNothingLeftOut = "Nothing was left out.",
        Tokens = "{count} tokens",
        ReceiptRulesAndReferences = "Rules and references",
        ReceiptRules = "Rules",
        ReceiptReferences = "References",
        ReceiptTools = "Tools",
        ReceiptNearMisses = "Near misses",
        ReceiptNone = "None",
        ReceiptShowValues = "Show values",
        ReceiptHideValues = "Hide values",
        ReceiptValuesUnknown = "The values are not known here.",
        ReceiptShowInConversation = "Show in the conversation",
        ReceiptMessages = "Messages",
        ReceiptMessagesGone = "These messages are no longer in the conversation.",
        ReceiptWhoYou = "You: ",
        ReceiptWhoAssistant = "Assistant: ",
        ReceiptWhoApproval = "Approval: ",
        ReceiptParts = "Parts",
        ReceiptOurCount = "Our count of the input",
        ReceiptOursExact = "{count} tokens ({encoding})",
        ReceiptOursEstimate = "~{count} tokens ({encoding}, an estimate)",
        ReceiptReportedBy = "Reported by the provider",
        ReceiptReportedDrift = "{input} in · {output} out (our count {drift} %)",
        ReceiptReported = "{input} in · {output} out",
        ReceiptNotReported = "not reported",
        ReceiptWindow = "Window",
        ReceiptWindowTokens = "{limit} tokens, {reserve} kept for the reply",
        // The empty chat's starters.
        // The approval dialog.
        ApprovalAsk = "Allow the assistant to use {tool}?",
        TokensPerRequest = "{count} tokens per request",
        ApprovalWith = "With",
        ApprovalClaims = "The tool's server says it {claims} (not checked).",
        ClaimReadsOnly = "only reads",
        ClaimMayChange = "may change things",
        ClaimMayDelete = "may delete or overwrite",
        ClaimSafeToRepeat = "is safe to repeat",
        ClaimReachesOutside = "reaches outside services",
        ClaimStaysWithin = "stays within its own data",
        ApprovalReason = "Reason, if you deny (the assistant is told)",
        Approve = "Approve",
        Deny = "Deny",
        AllowForThisSession = "Allow for this session",
        ApprovalMoreWaiting = "{count} more waiting",
        // The session drawer (rules, references, tool servers, settings).
        DrawerLabel = "This conversation's rules, references and settings",
        DrawerWaiting = "Waiting for the server…",
        DrawerNoAgent = "This server configures no agent: there are no rules or references to choose.",
        DrawerHeading = "Agent “{agent}”: {carried} of {total} items in this conversation",
        DrawerHint = "Checked items go with every message. The others are chosen per message by semantic search when their mode is agent.",
        DrawerItemsLabel = "Rules and references",
        DrawerServersLabel = "Tool servers and what their tools cost",
        DrawerServerCost = "Server {server}: {tools} tools, {tokens} tokens; {carried} in this conversation, {carried_tokens} tokens",
        KindRule = "Rule",
        KindReference = "Reference",
        KindTool = "Tool",
        DrawerToolLabel = "{server}.{name} · {tokens} tokens",
        DrawerMode = "mode: {mode}",
        BadgeAlways = "Always",
        BadgeManual = "Manual",
        DrawerSettingsLegend = "Settings for this conversation",
        DrawerDefaultOption = "default",
        DrawerDefaultIs = "default: {value}",
        DrawerReset = "Back to the agent's defaults",
        SettingTemperature = "Temperature",
        SettingTopP = "Top p",
        SettingMaxOutputTokens = "Longest reply (tokens)",
        SettingMaxChatTurns = "Tool rounds per reply",
        SettingToolPermission = "Tools",
        SettingToolBudget = "Tool budget (tokens)",
        SettingContextTopK = "Search: chunk matches (top K)",
        SettingContextTopN = "Search: items chosen (top N)",
        SettingContextIncludeScore = "Search: always chosen from score",
        SettingContextMinScore = "Search: never chosen below score",
        SettingContextExpansionDepth = "Expansion passes (0: off)",
        SettingContextExpansionThreshold = "Expansion: score to join",
        SettingContextExpansionTopN = "Expansion: items per pass",
        DefaultProviders = "the provider's",
        DefaultServers = "the server's",
        DefaultNone = "none",
        ToolPermissionAsk = "ask",
        ToolPermissionAllow = "allow",
        ToolPermissionDeny = "deny",
        SettingNotANumber = "{key}: not a number",
        SettingWantsWholeNumber = "{key}: a whole number, not {typed}",
        SettingWantsNumber = "{key}: a number, not {typed}",
        SettingNotAChoice = "{key}: not one of the choices",
        // The user's conversations (in the session drawer).
        YourConversations = "Your conversations",
        NewConversation = "New conversation",
        LoadingConversations = "Loading your conversations…",
        NoConversationsYet = "No conversations yet: the first message starts one.",
        UntitledConversation = "Untitled conversation",
        ConversationNewTitle = "New title",
        RenameConversation = "Rename “{title}”",
        Rename = "Rename",
        ConfirmDeleteConversation = "Confirm: delete “{title}” for good",
        DeleteConversation = "Delete “{title}”",
        ClickAgainToDelete = "Click again to delete",
        Delete = "Delete",
        DeleteQuestion = "Delete?",
        JustNow = "just now",
        MinutesAgo = "{n} min ago",
        HoursAgo = "{n} h ago",
        Yesterday = "yesterday",
        DaysAgo = "{n} days ago",
        // The compression settings.
        ContextManagement = "Context management",
        EnableCompression = "Enable smart context compression",
        CompressWhenContextReaches = "When context reaches",
        CompressPercentOfLimit = "% of limit",
        CompressThresholdWhole = "threshold must be a whole number 1–100",
        CompressStrategy = "Strategy",
        CompressAlwaysKeepLast = "Always keep last",
        CompressMessagesIntact = "messages intact",
        CompressKeepWhole = "messages to keep must be a whole number",
        ShowCompressionIndicator = "Show compression indicator in chat",
        // The topic panel.
        StickyTopicHint = "Standing instructions always reach the model",
        StickyTopic = "Instructions & Preferences",
        TopicsSelectLabel = "Topics: select the ones that matter now",
        TopicsEmpty = "Topics appear after the first reply.",
        TopicFilterUnavailable = "Filtering needs the embedding model, which is unavailable",
        TopicSimilarityOff = "Similarity mode is off: bubbles are for looking only",
        TopicSendOnlySelected = "Send only messages about the selected topics (plus standing instructions)",
        TopicGoneHint = "This selected topic is gone since the topics were regenerated: it selects nothing. Click to clear it.",
        TopicGoneClear = "(gone; clear)",
        FilterHistoryByTopic = "Filter history by topic",
        // The receipt's rows (app/src/receipt_rows.rs): why a part went.
        ReasonAlways = "always sent",
        ReasonFits = "fits the budget",
        ReasonPreserved = "recent: compression never touches it",
        ReasonCompression = "written by the model in place of older messages",
        ReasonResume = "first message after the session resumed",
        ReasonToolLoop = "the model called a tool while answering",
        ReasonSticky = "a standing instruction: always sent",
        ReasonPinned = "pinned by you: always sent",
        ReasonTopicMember = "grouped under a selected topic",
        ReasonTopicMatch = "matches a selected topic",
        ReasonFallback = "no message matched the selected topics, so all of them went",
        ReasonManual = "added to this conversation by you",
        ReasonAgent = "semantic search matched it to your message",
        ReasonExpansion = "semantic search matched it to an item already chosen",
        ReasonLoaded = "left out over the tool budget, then loaded by the model in this reply",
        // The receipt's rows: why something was left out.
        LeftOutLowValue = "an acknowledgement compression leaves out",
        LeftOutWindow = "older than compression's sliding window",
        LeftOutSummarized = "replaced by the summary",
        LeftOutSummaryUnavailable = "compression wanted a summary but none could be written",
        LeftOutTopicFilter = "below the threshold for the selected topics",
        LeftOutOtherTopic = "about a topic you did not select",
        LeftOutExcluded = "excluded by you",
        LeftOutBeyondWindow = "older than one window can hold: not read for this reply",
        LeftOutMemoryCap = "pinned or a standing instruction beyond the tokens kept for them, so compression treated it as older history and left it out",
        LeftOutBelowThreshold = "semantic search scored it just below what it chose",
        LeftOutKnowledgeCap = "rules and references may take only a quarter of the window: lower-ranked items go first",
        LeftOutToolCap = "the tools may take only the tool budget: lower-ranked tools go first, and the model can load them",
        // The receipt's rows: a reason with the scores of its messages or item ({why}: a reason above).
        ReceiptWhyScore = "{why} (score {score})",
        ReceiptWhyScores = "{why} (scores {low}–{high})",
        // The receipt's rows: what each part is.
        ReceiptMessagesOne = "1 message",
        ReceiptMessagesMany = "{count} messages",
        ReceiptSummaryOne = "Summary of 1 message",
        ReceiptSummaryMany = "Summary of {count} messages",
        ReceiptToolsOffered = "Tools offered",
        ReceiptResume = "Reminder of the session's context",
        ReceiptToolCall = "Tool round {round}, call {call}: {name}",
        ReceiptToolCallError = "Tool round {round}, call {call}: {name} (error)",
        ReceiptAttachments = "Its attachments",
        ReceiptImage = "Image {name}",
        ReceiptTextFile = "Text file {name}",
        ReceiptUserMessage = "The message being answered",
        ReceiptRuleItem = "Rule {priority} · {name}",
        ReceiptReferenceItem = "Reference {priority} · {name}",
        ReceiptToolItem = "Tool {server}.{name}",
        // The receipt's rows: the remark under a part.
        ReceiptNoteSystemPrompt = "Its text stays on the server.",
        ReceiptNotePageContext = "Sent as data from the page, not as instructions.",
        ReceiptNoteTools = "Definitions and instructions stay on the server; each tool item has a row of its own.",
        ReceiptNoteAttachments = "Their metadata (name, type, size, link), sent as data.",
        ReceiptNoteImage = "Sent as an image; tokens by the provider's rule for its size.",
        ReceiptNoteTextFile = "Its text, sent as delimited data.",
        ReceiptNoteToolItem = "Its definition is offered with the request; its results come back as data.",
        ReceiptNoteItem = "Sent as data in your message's turn, after the conversation.",
        // The receipt's items: how an item came in (with BadgeAlways, BadgeManual), and why one did not go.
        BadgeAgent = "Agent",
        BadgeExpansion = "Expansion",
        ReceiptMissBelowThresholdScore = "{score}, below the threshold",
        ReceiptMissBelowThreshold = "below the threshold",
        ReceiptMissKnowledgeCap = "left out: over the knowledge budget",
        ReceiptMissToolCap = "left out: over the tool budget (the model can load it)",
        // The receipt's items (and the draft preview): why semantic search chose no items ({reason}: the server's words).
        ItemSearchNoItems = "No items for semantic search to choose from.",
        ItemSearchUnavailable = "Semantic search was unavailable: this reply went without agent-chosen items.",
        ItemSearchUnavailableWhy = "Semantic search was unavailable ({reason}): this reply went without agent-chosen items.",
        ItemSearchFailed = "Semantic search failed: this reply went without agent-chosen items.",
        ItemSearchFailedWhy = "Semantic search failed ({reason}): this reply went without agent-chosen items.",
        // The compression settings: the strategies.
        StrategySummarize = "Summarize only",
        StrategyDropLowValue = "Drop low-value only",
        StrategySlidingWindow = "Sliding window (simple)",
        StrategyHybrid = "Summarize & drop low-value (hybrid, recommended)",
        // The topic panel's status line (One/Many: by {total}).
        TopicsAllInContext = "All messages in context",
        TopicsInContextOne = "{count} of {total} message in context",
        TopicsInContextMany = "{count} of {total} messages in context",
    }
}
